package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
)

// TestBudgetSampling: past the budget a fraction budget/rate of requests is
// kept, each whole (its child spans too), each span saying the rate.
func TestBudgetSampling(t *testing.T) {
	b := NewBudget(100)
	run := func(n int) (roots, children int, rates map[float64]int) {
		var got []*spanrec.Span
		sink := spanbuilder.NewOTelSink(func(s []*spanrec.Span) { got = append(got, s...) }, nil, "test")
		sink.Sampler = b.Sampler()
		at := time.Unix(1_700_000_000, 0)
		for i := range n {
			sink.Step(spanbuilder.Step{RequestID: fmt.Sprint("req-", i), TID: 1, Start: at, End: at,
				Calls: []spanbuilder.Call{{Stage: "verify", Start: at, End: at}}})
		}
		sink.Close()
		rates = map[float64]int{}
		for _, s := range got {
			if s.Parent == (spanrec.SpanID{}) {
				roots++
			} else {
				children++
			}
			if v, ok := s.Attr(SamplingRateKey); ok {
				rates[v.AsFloat64()]++
			}
		}
		return
	}
	// Each request: root, thread span, decode_forward, decode_loop, spec_verify.
	b.Observe(50) // under budget: everything, rate 1
	if roots, children, rates := run(1000); roots != 1000 || children != 4000 || rates[1] != 5000 {
		t.Errorf("under budget: %d roots, %d children, rates %v; want all, rate 1 on each", roots, children, rates)
	}
	b.Observe(400) // 4x over: a quarter
	roots, children, rates := run(8000)
	// Binomial(8000, 0.25): mean 2000, sd ~39.
	if roots < 1800 || roots > 2200 || children != 4*roots || rates[0.25] != 5*roots || len(rates) != 1 {
		t.Errorf("over budget: %d roots, %d children, rates %v; want ~2000 whole requests at rate 0.25", roots, children, rates)
	}
	if got := b.Rate(); got != 0.25 {
		t.Errorf("rate %v, want 0.25", got)
	}
	unlimited := NewBudget(0)
	if unlimited.Observe(1e9); unlimited.Rate() != 1 {
		t.Error("budget 0 sampled")
	}
}
