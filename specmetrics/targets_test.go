package specmetrics

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
)

// Past maxTargets the oldest target's counters go; the others stay, each
// with its own count.
func TestTargetsBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	for pid := 1; pid <= maxTargets+1; pid++ {
		m.Target("demo", pid).Step(&spanbuilder.Step{RequestID: "r", Calls: []spanbuilder.Call{{
			Stage: "verify", Start: at, End: at.Add(time.Millisecond), EndBoot: 1,
			Values: []spanbuilder.Value{{Name: "num_correct_drafts", V: int64(pid)}},
		}}}, spanrec.TraceID{}, spanrec.SpanID{}, false)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	accepted := map[int64]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != AcceptedTokens.Name {
				continue
			}
			for _, p := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				pid, _ := p.Attributes.Value(KeyPID)
				accepted[pid.AsInt64()] = p.Value
			}
		}
	}
	if _, ok := accepted[1]; ok || len(accepted) != maxTargets || accepted[2] != 2 || accepted[maxTargets+1] != maxTargets+1 {
		t.Errorf("%d targets' series (PID 1: %v, 2: %d, last: %d); want the first gone and %d others with their own counts",
			len(accepted), accepted[1], accepted[2], accepted[maxTargets+1], maxTargets)
	}
}
