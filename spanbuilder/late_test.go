package spanbuilder

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

type collect struct{ steps []Step }

func (c *collect) Step(s Step) { c.steps = append(c.steps, s) }

// step is one request's step of a traced verify.
func step(rid string, key VerifyKey) Step {
	return Step{RequestID: rid, Calls: []Call{{Stage: "draft"}, {Stage: "verify", TID: key.TID, EndBoot: key.End}, {Stage: "draft_extend"}}}
}

func count(s Step) (int64, bool) {
	for _, c := range s.Calls {
		if c.Stage != "verify" || c.Err != "" {
			continue
		}
		for _, v := range c.Values {
			if v.Name == "num_correct_drafts" {
				return v.V, true
			}
		}
	}
	return 0, false
}

// engine plays a scheduler thread: step k verifies batches[k], and the
// counts of step k are read lag steps later (after the verify of step
// k+lag), as SGLang's normal (lag 0) and overlap (lag 1) loops do. Steps
// before attach are run but not traced; their counts may still arrive.
type engine struct {
	batches  [][]string
	lag      int
	attach   int          // first traced step
	lostRead map[int]bool // traced verifies whose requests could not be read
	badCount map[int]bool // count reads that failed
	reorder  bool         // counts read in another order than the verify's (vLLM)
}

// want is the count of rid at step k: distinct per step and request.
func want(k, i int) int64 { return int64(10*k + i%10) }

// run feeds the engine's events to a matcher and returns the steps out.
func (e engine) run(t *testing.T) []Step {
	out := &collect{}
	late := NewLateAccept(out)
	m := NewCountMatcher(late)
	accept := func(k int) {
		if k < 0 || k >= len(e.batches) {
			return
		}
		if e.badCount[k] {
			m.Unreadable(1)
			return
		}
		counts := make([]int64, len(e.batches[k]))
		for i := range counts {
			counts[i] = want(k, i)
		}
		rids := e.batches[k]
		if e.reorder {
			rids = slices.Clone(rids)
			slices.Reverse(rids)
			slices.Reverse(counts)
		}
		m.Counts(1, rids, counts)
	}
	var steps []Step
	for k := range e.batches {
		key := VerifyKey{TID: 1, End: uint64(1000 + k)}
		if k >= e.attach {
			rids := e.batches[k]
			if e.lostRead[k] {
				rids = nil
			}
			m.Verify(key, rids)
			if rids != nil {
				for _, rid := range rids {
					steps = append(steps, step(rid, key))
				}
			}
		}
		if e.lag == 0 && k >= e.attach {
			accept(k)
		}
		// The builder hands a step on when the next one begins.
		for _, s := range steps {
			late.Step(s)
		}
		steps = nil
		if e.lag == 1 && k >= e.attach {
			accept(k - 1)
		}
	}
	if e.lag == 1 {
		accept(len(e.batches) - 1)
	}
	late.CloseAll()
	return out.steps
}

func batches(n int, f func(k int) []string) [][]string {
	out := make([][]string, n)
	for k := range out {
		out[k] = f(k)
	}
	return out
}

// Every count that lands is the right one, and where the matching can
// decide, every traced verify gets its count.
func TestCountMatcherNeverWrong(t *testing.T) {
	same := batches(12, func(int) []string { return []string{"a", "b", "c"} })
	grow := batches(12, func(k int) []string {
		out := []string{"a"}
		for i := 1; i <= k%4; i++ {
			out = append(out, fmt.Sprintf("r%d", i))
		}
		return out
	})
	for _, tc := range []struct {
		name  string
		e     engine
		every bool // every traced verify's steps carry counts
		least int  // or at least this many steps do
	}{
		{"overlap, fresh start", engine{batches: same, lag: 1}, true, 0},
		{"normal, fresh start, batches change", engine{batches: grow, lag: 0}, true, 0},
		{"overlap, attached mid-run, batches change", engine{batches: grow, lag: 1, attach: 3}, false, 20},
		{"normal, attached mid-run, batches change", engine{batches: grow, lag: 0, attach: 3}, false, 20},
		{"overlap, mid-run, the same batch every step", engine{batches: same, lag: 1, attach: 3}, false, 0},
		{"normal, the same batch every step", engine{batches: same, lag: 0}, false, 0},
		{"overlap, a verify read lost", engine{batches: grow, lag: 1, lostRead: map[int]bool{4: true}}, false, 25},
		{"overlap, a count read failed", engine{batches: grow, lag: 1, badCount: map[int]bool{5: true}}, false, 25},
		{"normal, a count read failed", engine{batches: grow, lag: 0, badCount: map[int]bool{2: true}}, false, 25},
		{"normal, counts in another order, batches change", engine{batches: grow, lag: 0, reorder: true}, true, 0},
		{"overlap, counts in another order, batches change", engine{batches: grow, lag: 1, reorder: true}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := tc.e.run(t)
			got := 0
			for _, s := range steps {
				n, ok := count(s)
				if !ok {
					continue
				}
				k := int(s.Calls[1].EndBoot - 1000)
				i := -1
				for j, rid := range tc.e.batches[k] {
					if rid == s.RequestID {
						i = j
					}
				}
				if n != want(k, i) {
					t.Errorf("step %d %s: count %d, want %d", k, s.RequestID, n, want(k, i))
				}
				got++
			}
			if tc.every && got != len(steps) {
				t.Errorf("%d of %d steps got their count", got, len(steps))
			}
			if got < tc.least {
				t.Errorf("%d steps got their count, want at least %d", got, tc.least)
			}
		})
	}
}

// A count read before a verify's steps reach the LateAccept (the normal
// loop resolves within the step) still lands; a verify that raised does
// not get it, its retry does; a request that had no draft gets none.
func TestLateAcceptOrderRaisedAndNoDrafts(t *testing.T) {
	out := &collect{}
	late := NewLateAccept(out)
	key := VerifyKey{TID: 1, End: 7}
	late.Expect(key, 2)
	late.Count(key, "r", 3)
	late.NoCount(key, "p")
	late.Close(key)
	late.Step(Step{RequestID: "r", Calls: []Call{{Stage: "verify", Err: "raised VerifyFailed", TID: 1, EndBoot: 5}, {Stage: "verify", TID: 1, EndBoot: 7}}})
	late.Step(step("p", key))
	if len(out.steps) != 2 {
		t.Fatalf("%d steps out, want 2", len(out.steps))
	}
	if len(out.steps[0].Calls[0].Values) != 0 {
		t.Errorf("the verify that raised got %v", out.steps[0].Calls[0].Values)
	}
	if n, ok := count(out.steps[0]); !ok || n != 3 {
		t.Errorf("the retry: count %d %v, want 3", n, ok)
	}
	if _, ok := count(out.steps[1]); ok {
		t.Errorf("the request without drafts got a count")
	}
	if late.Matched != 1 || late.Unmatched != 0 || len(late.waiting) != 0 {
		t.Errorf("matched %d unmatched %d waiting %d", late.Matched, late.Unmatched, len(late.waiting))
	}
}

// Steps whose counts have not come GiveUpAfter after their verify, by the
// boot time read up to, go on without them.
func TestLateAcceptExpire(t *testing.T) {
	out := &collect{}
	late := NewLateAccept(out)
	key := VerifyKey{TID: 1, End: 7}
	late.Expect(key, 1)
	late.Step(step("r", key))
	late.Expire(7 + uint64(late.GiveUpAfter) - 1)
	if len(out.steps) != 0 {
		t.Fatalf("released before GiveUpAfter")
	}
	late.Expire(7 + uint64(late.GiveUpAfter))
	if len(out.steps) != 1 || late.Unmatched != 1 {
		t.Fatalf("%d steps out, unmatched %d; want 1 and 1", len(out.steps), late.Unmatched)
	}
}

// A thread that exited is forgotten by the matching: the verify whose
// counts it never read goes on at once without them, and a new thread
// given its ID gets its own counts, not a place behind the dead thread's.
// Where a stream joins threads, the stream is kept.
func TestCountMatcherForget(t *testing.T) {
	run := func(forget bool, stream func(uint32) uint32) (*collect, *CountMatcher) {
		out := &collect{}
		late := NewLateAccept(out)
		m := NewCountMatcher(late)
		m.Stream = stream
		verify := func(end uint64, rids ...string) {
			key := VerifyKey{TID: 1, End: end}
			m.Verify(key, rids)
			for _, rid := range rids {
				late.Step(step(rid, key))
			}
		}
		// The dead thread: two steps counted, the third's counts never read.
		verify(1, "a")
		m.Counts(1, []string{"a"}, []int64{1})
		verify(2, "a", "b")
		m.Counts(1, []string{"a", "b"}, []int64{2, 2})
		verify(3, "a", "b", "c")
		if forget {
			m.Forget(1)
		}
		// A new thread with the same ID: two steps, which tell its reads
		// are for its own verifies.
		verify(10, "x")
		m.Counts(1, []string{"x"}, []int64{7})
		verify(11, "x", "y")
		m.Counts(1, []string{"x", "y"}, []int64{8, 8})
		return out, m
	}
	counted := func(out *collect) map[string]int64 {
		got := map[string]int64{}
		for _, s := range out.steps {
			if n, ok := count(s); ok {
				got[fmt.Sprintf("%s@%d", s.RequestID, s.Calls[1].EndBoot)] = n
			}
		}
		return got
	}
	if got := counted(func() *collect { out, _ := run(false, nil); return out }()); got["x@10"] == 7 {
		t.Fatalf("without Forget the new thread's count landed (%v): this test proves nothing", got)
	}
	out, m := run(true, nil)
	got := counted(out)
	if want := map[string]int64{"a@1": 1, "a@2": 2, "b@2": 2, "x@10": 7, "x@11": 8, "y@11": 8}; !maps.Equal(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	for _, rid := range []string{"a", "b", "c"} {
		if _, ok := got[rid+"@3"]; ok {
			t.Errorf("%s@3 got a count its thread never read", rid)
		}
	}
	if len(out.steps) != 9 {
		t.Errorf("%d steps out, want 9: the dead thread's last verify's three at Forget, not held", len(out.steps))
	}
	if len(m.threads) != 1 {
		t.Errorf("%d threads kept, want the new thread's", len(m.threads))
	}
	// A stream that joins threads is not the thread's to drop.
	_, m = run(true, func(uint32) uint32 { return 5 })
	if m.threads[5] == nil {
		t.Error("Forget dropped a stream that joins threads")
	}
}
