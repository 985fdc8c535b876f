package daemon

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestBudgetSampling: past the budget a fraction budget/rate of requests is
// kept, each whole (its child spans too), each span saying the rate.
func TestBudgetSampling(t *testing.T) {
	b := NewBudget(100)
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(b.Sampler()), sdktrace.WithSyncer(mem))
	tr := tp.Tracer("test")
	run := func(n int) (roots, children int, rates map[float64]int) {
		mem.Reset()
		for range n {
			ctx, root := tr.Start(context.Background(), "Req")
			_, child := tr.Start(ctx, "spec_verify")
			child.End()
			root.End()
		}
		rates = map[float64]int{}
		for _, s := range mem.GetSpans().Snapshots() {
			if s.Name() == "Req" {
				roots++
			} else {
				children++
			}
			for _, kv := range s.Attributes() {
				if kv.Key == SamplingRateKey {
					rates[kv.Value.AsFloat64()]++
				}
			}
		}
		return
	}

	b.Observe(50) // under budget: everything, rate 1
	if roots, children, rates := run(1000); roots != 1000 || children != 1000 || rates[1] != 2000 {
		t.Errorf("under budget: %d roots, %d children, rates %v; want all, rate 1 on each", roots, children, rates)
	}
	b.Observe(400) // 4x over: a quarter
	roots, children, rates := run(8000)
	// Binomial(8000, 0.25): mean 2000, sd ~39.
	if roots < 1800 || roots > 2200 || children != roots || rates[0.25] != 2*roots || len(rates) != 1 {
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
