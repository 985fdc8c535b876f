package spanbuilder

import (
	"testing"
	"time"
)

type collect struct{ steps []Step }

func (c *collect) Step(s Step) { c.steps = append(c.steps, s) }

func verifyStep(rid string, at time.Time) Step {
	return Step{RequestID: rid, Start: at, End: at, Calls: []Call{{Stage: "draft"}, {Stage: "verify"}}}
}

// Overlap scheduling: verify k's count arrives after verify k+1 ran.
func TestStitcherOverlap(t *testing.T) {
	out := &collect{}
	st := NewStitcher(out)
	t0 := time.Unix(100, 0)
	accepted := []int64{3, 0, 4, 2}
	var total int64
	st.Counts("r", 0, 0, t0) // read at the first verify's entry
	for k := range accepted {
		st.Step(verifyStep("r", t0))
		if k > 0 { // the previous verify resolves after this one launched
			total += accepted[k-1]
			st.Counts("r", int64(k), total, t0)
		}
	}
	if len(out.steps) != 3 {
		t.Fatalf("%d steps released before the last count, want 3", len(out.steps))
	}
	total += accepted[3]
	st.Counts("r", 4, total, t0)
	if len(out.steps) != 4 {
		t.Fatalf("%d steps released, want 4", len(out.steps))
	}
	for i, s := range out.steps {
		v := s.Calls[1].Values
		if len(v) != 1 || v[0].Name != "num_correct_drafts" || v[0].V != accepted[i] {
			t.Errorf("step %d: %v, want %d", i, v, accepted[i])
		}
	}
	if st.Stitched != 4 || st.Unresolved != 0 {
		t.Errorf("stitched %d unresolved %d", st.Stitched, st.Unresolved)
	}
}

// A request first seen mid-way starts counting from what it had resolved then;
// one whose counts stop comes out without a count after GiveUpAfter.
func TestStitcherBaseAndGiveUp(t *testing.T) {
	out := &collect{}
	st := NewStitcher(out)
	t0 := time.Unix(100, 0)
	st.Counts("r", 5, 17, t0)
	st.Step(verifyStep("r", t0))
	st.Counts("r", 6, 20, t0)
	st.Step(verifyStep("r", t0))
	if len(out.steps) != 1 || out.steps[0].Calls[1].Values[0].V != 3 {
		t.Fatalf("released %+v", out.steps)
	}
	st.Expire(t0.Add(time.Second))
	if len(out.steps) != 1 {
		t.Fatal("released before GiveUpAfter")
	}
	st.Expire(t0.Add(3 * time.Second))
	if len(out.steps) != 2 || len(out.steps[1].Calls[1].Values) != 0 || st.Unresolved != 1 {
		t.Errorf("after giving up: %+v, unresolved %d", out.steps, st.Unresolved)
	}
}
