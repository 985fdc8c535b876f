package spanbuilder

import (
	"testing"
	"time"
)

type collect struct{ steps []Step }

func (c *collect) Step(s Step) { c.steps = append(c.steps, s) }

func verifyStep(rid string) Step {
	return Step{RequestID: rid, Calls: []Call{{Stage: "draft"}, {Stage: "verify"}, {Stage: "draft_extend"}}}
}

func count(s Step) (int64, bool) {
	for _, v := range s.Calls[1].Values {
		if v.Name == "num_correct_drafts" {
			return v.V, true
		}
	}
	return 0, false
}

// Counts arrive a step late (overlap scheduling) or at once; either way the
// k-th count of a request lands on its k-th verify.
func TestLateAcceptMatchesInOrder(t *testing.T) {
	for _, lateBy := range []int{0, 1} {
		out := &collect{}
		l := NewLateAccept(out)
		l.Follow("r")
		accepted := []int64{3, 0, 4, 2}
		for k := range accepted {
			l.Step(verifyStep("r"))
			if k-lateBy >= 0 {
				l.Accepted("r", accepted[k-lateBy], time.Unix(1, 0))
			}
		}
		if lateBy == 1 {
			if len(out.steps) != 3 {
				t.Fatalf("lateBy 1: %d steps out before the last count, want 3", len(out.steps))
			}
			l.Accepted("r", accepted[3], time.Unix(1, 0))
		}
		for i, s := range out.steps {
			if n, ok := count(s); !ok || n != accepted[i] {
				t.Errorf("lateBy %d step %d: count %d %v, want %d", lateBy, i, n, ok, accepted[i])
			}
		}
		if l.Matched != 4 || l.Unmatched != 0 {
			t.Errorf("lateBy %d: matched %d unmatched %d", lateBy, l.Matched, l.Unmatched)
		}
	}
}

// A request not followed passes through without a count; forgetting
// releases what was held, without counts; counts for unknown requests are
// dropped.
func TestLateAcceptUnfollowedAndForget(t *testing.T) {
	out := &collect{}
	l := NewLateAccept(out)
	l.Step(verifyStep("x"))
	l.Accepted("x", 2, time.Unix(1, 0))
	l.Follow("r")
	l.Step(verifyStep("r"))
	if len(out.steps) != 1 {
		t.Fatalf("%d steps out, want only the unfollowed one", len(out.steps))
	}
	l.ForgetAll()
	if len(out.steps) != 2 {
		t.Fatalf("ForgetAll released %d steps, want 2 in all", len(out.steps))
	}
	for _, s := range out.steps {
		if _, ok := count(s); ok {
			t.Errorf("%s got a count", s.RequestID)
		}
	}
	if l.Unmatched != 2 || l.Matched != 0 {
		t.Errorf("matched %d unmatched %d", l.Matched, l.Unmatched)
	}
}

// A verify that raised produced no tokens: the count goes to the retry in
// the same step, never to the failed call.
func TestLateAcceptSkipsFailedVerify(t *testing.T) {
	out := &collect{}
	l := NewLateAccept(out)
	l.Follow("r")
	l.Step(Step{RequestID: "r", Calls: []Call{{Stage: "draft"}, {Stage: "verify", Err: "raised VerifyFailed"}, {Stage: "verify"}}})
	l.Accepted("r", 3, time.Unix(1, 0))
	if len(out.steps) != 1 {
		t.Fatalf("%d steps out, want 1", len(out.steps))
	}
	calls := out.steps[0].Calls
	if len(calls[1].Values) != 0 {
		t.Errorf("the failed verify got %v", calls[1].Values)
	}
	if len(calls[2].Values) != 1 || calls[2].Values[0].V != 3 {
		t.Errorf("the retry got %v, want num_correct_drafts 3", calls[2].Values)
	}
}

// A verify that checked no draft (vLLM prefill) takes its place in line
// without a count: the next count goes to the next verify.
func TestLateAcceptNoDrafts(t *testing.T) {
	out := &collect{}
	l := NewLateAccept(out)
	l.Follow("r")
	l.Step(verifyStep("r"))
	l.Step(verifyStep("r"))
	l.NoDrafts("r", time.Unix(1, 0))
	l.Accepted("r", 2, time.Unix(1, 0))
	if len(out.steps) != 2 {
		t.Fatalf("%d steps out, want 2", len(out.steps))
	}
	if n, ok := count(out.steps[0]); ok {
		t.Errorf("the verify without drafts got count %d", n)
	}
	if n, ok := count(out.steps[1]); !ok || n != 2 {
		t.Errorf("second verify: count %d %v, want 2", n, ok)
	}
	if l.Matched != 1 || l.Unmatched != 0 {
		t.Errorf("matched %d unmatched %d, want 1 and 0", l.Matched, l.Unmatched)
	}
}
