package specmetrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/specmetrics"
)

var t0 = time.Unix(1_700_000_000, 0)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// steps feeds a sink two requests served by one batched verify per step:
// request a accepts 3 of 4 drafts, b 0 of 4, in each of n steps; the
// sampler keeps a's trace and leaves b's out.
func steps(t *testing.T, target *specmetrics.Target, n int) []*spanrec.Span {
	var spans []*spanrec.Span
	sink := spanbuilder.NewOTelSink(func(s []*spanrec.Span) {
		for _, sp := range s {
			c := *sp
			spans = append(spans, &c)
		}
	}, nil, "test")
	sink.Sampler = keepOnly{}
	sink.OnStep = target.Step
	for i := range n {
		at := 100 * i
		verify := spanbuilder.Call{Stage: "verify", TID: 7, Start: ms(at + 10), End: ms(at + 40), EndBoot: uint64(at + 40)}
		for _, r := range []struct {
			rid     string
			correct int64
		}{{"a", 3}, {"b", 0}} {
			v := verify
			v.Values = []spanbuilder.Value{{Name: "num_correct_drafts", V: r.correct}, {Name: "num_drafts", V: 4}}
			sink.Step(spanbuilder.Step{RequestID: r.rid, TID: 7, Start: ms(at), End: ms(at + 40), Calls: []spanbuilder.Call{
				{Stage: "draft", TID: 7, Start: ms(at), End: ms(at + 5), EndBoot: uint64(at + 5), Values: []spanbuilder.Value{{Name: "num_drafts", V: 4}}},
				v,
			}})
		}
	}
	sink.Close()
	return spans
}

// keepOnly keeps request a's trace: the first request the sink sees.
type keepOnly struct{}

var seen = map[spanrec.TraceID]int{}

func (keepOnly) Sample(id spanrec.TraceID) (bool, float64) {
	seen[id] = len(seen)
	return seen[id]%2 == 0, 0.5
}

func collect(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := specmetrics.New(mp.Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	target := m.Target("sglang", 4242, attribute.String("k8s.pod.name", "sglang-0"), attribute.String("k8s.node.name", "left-out"))
	spans := steps(t, target, 5)
	got := collect(t, reader)

	wantAttrs := attribute.NewSet(specmetrics.KeyEngine.String("sglang"), semconv.ProcessPIDKey.Int(4242), semconv.K8SPodNameKey.String("sglang-0"))
	// Acceptance length: 10 verifies of a request, 5 at 3 and 5 at 0.
	al := got[specmetrics.AcceptanceLength.Name].Data.(metricdata.Histogram[float64])
	if len(al.DataPoints) != 1 || al.DataPoints[0].Count != 10 || al.DataPoints[0].Sum != 15 || !al.DataPoints[0].Attributes.Equals(&wantAttrs) {
		t.Fatalf("acceptance length %+v", al.DataPoints)
	}
	if b := al.DataPoints[0].BucketCounts; b[0] != 5 || b[3] != 5 {
		t.Errorf("acceptance length buckets %v: want 5 at 0 and 5 at 3", b)
	}
	// Per position: a accepted positions 0..2 five times each, b none;
	// position 3 exists (4 drafts) with nothing accepted.
	pp := got[specmetrics.AcceptedPerPosition.Name].Data.(metricdata.Sum[int64])
	perPos := map[int64]int64{}
	for _, p := range pp.DataPoints {
		v, _ := p.Attributes.Value(specmetrics.KeyPosition)
		perPos[v.AsInt64()] = p.Value
	}
	if len(perPos) != 4 || perPos[0] != 5 || perPos[1] != 5 || perPos[2] != 5 || perPos[3] != 0 {
		t.Errorf("per position %v, want 5 5 5 0", perPos)
	}
	// A batched verify counts once per call, not once per request.
	sum := func(name string) int64 {
		var n int64
		for _, p := range got[name].Data.(metricdata.Sum[int64]).DataPoints {
			n += p.Value
		}
		return n
	}
	if v, a, d := sum(specmetrics.Verifies.Name), sum(specmetrics.AcceptedTokens.Name), sum(specmetrics.DraftedTokens.Name); v != 5 || a != 15 || d != 40 {
		t.Errorf("verifies %d accepted %d drafted %d, want 5 15 40", v, a, d)
	}
	durs := got[specmetrics.StageDuration.Name].Data.(metricdata.Histogram[float64])
	byStage := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, p := range durs.DataPoints {
		v, _ := p.Attributes.Value(specmetrics.KeyStage)
		byStage[v.AsString()] = p
	}
	if byStage["verify"].Count != 5 || byStage["draft"].Count != 5 || byStage["verify"].Sum < 0.149 || byStage["verify"].Sum > 0.151 {
		t.Errorf("stage durations %+v", byStage)
	}
	// Exemplars name a trace that was exported: a's, never b's.
	exported := map[string]bool{}
	for _, s := range spans {
		exported[string(s.Trace[:])] = true
	}
	ex := byStage["verify"].Exemplars
	if len(ex) == 0 {
		t.Fatal("no exemplar on the verify durations")
	}
	for _, e := range ex {
		if !exported[string(e.TraceID)] || len(e.SpanID) != 8 {
			t.Errorf("exemplar trace %x span %x is not an exported trace", e.TraceID, e.SpanID)
		}
	}
}

// Names, units and keys follow OpenTelemetry's conventions: durations in
// seconds named *.duration, counts with a {unit} annotation, the
// conventions' own keys for the process and the pod.
func TestConventions(t *testing.T) {
	for _, in := range specmetrics.Instruments {
		switch {
		case strings.HasSuffix(in.Name, ".duration"):
			if in.Unit != "s" || in.Kind != "histogram" {
				t.Errorf("%s: a duration is a histogram in s, not %s %s", in.Name, in.Kind, in.Unit)
			}
		case !strings.HasPrefix(in.Unit, "{") || !strings.HasSuffix(in.Unit, "}"):
			t.Errorf("%s: a count's unit is an annotation like {token}, not %q", in.Name, in.Unit)
		}
		if strings.HasSuffix(in.Name, "_total") || strings.HasSuffix(in.Name, ".total") || !strings.HasPrefix(in.Name, "specprobe.") {
			t.Errorf("%s: counters are not named *total (exporters add it); names are in specprobe's namespace", in.Name)
		}
	}
	for key, conv := range map[attribute.Key]attribute.Key{
		specmetrics.KeyPID: semconv.ProcessPIDKey, specmetrics.KeyPod: semconv.K8SPodNameKey, specmetrics.KeyNamespace: semconv.K8SNamespaceNameKey,
	} {
		if key != conv {
			t.Errorf("%s is not the conventions' %s", key, conv)
		}
	}
}
