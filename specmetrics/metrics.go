// Package specmetrics makes the speculative-decoding metrics users chart,
// from the steps the span builder makes: how many drafts each verify
// accepted (a histogram), how often the draft at each position was
// accepted (vLLM's spec_decode_num_accepted_tokens_per_pos), how long
// drafts and verifies took (histograms, with the trace of a slow step as
// the exemplar), and verifies, accepted and drafted tokens (counters). The
// daemon serves them on /metrics and over OTLP; attach sends them over
// OTLP. Each target's series carry its engine, process and pod.
package specmetrics

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
)

// Instrument is one metric: what the dashboards and tests name.
type Instrument struct {
	Name, Unit, Description string
	Kind                    string // "histogram" or "counter"
	Buckets                 []float64
}

// Metric names, units and buckets. Durations are in seconds and named
// *.duration, counts have a {unit} annotation, as OpenTelemetry's
// conventions ask; none of these has a convention of its own.
var (
	AcceptanceLength = Instrument{"specprobe.spec.acceptance_length", "{token}",
		"Drafts accepted by one verify of one request (num_correct_drafts; the bonus token not counted)", "histogram",
		[]float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 32}}
	AcceptedPerPosition = Instrument{"specprobe.spec.accepted_tokens_per_position", "{token}",
		"Verifies whose draft at specprobe.spec.position (0 is the first draft) was accepted: vLLM's spec_decode_num_accepted_tokens_per_pos", "counter", nil}
	StageDuration = Instrument{"specprobe.spec.stage.duration", "s",
		"Duration of a draft, verify or draft_extend call (specprobe.stage); a batched call counts once", "histogram",
		[]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}}
	Verifies       = Instrument{"specprobe.spec.verifies", "{verify}", "Verify calls", "counter", nil}
	AcceptedTokens = Instrument{"specprobe.spec.accepted_tokens", "{token}", "Draft tokens accepted by verify (num_correct_drafts)", "counter", nil}
	DraftedTokens  = Instrument{"specprobe.spec.drafted_tokens", "{token}", "Draft tokens proposed or verified (num_drafts)", "counter", nil}
)

// Instruments lists every metric the package makes.
var Instruments = []Instrument{AcceptanceLength, AcceptedPerPosition, StageDuration, Verifies, AcceptedTokens, DraftedTokens}

// Attribute keys of the series. Where OpenTelemetry's conventions have a
// key, it is theirs.
const (
	KeyEngine    = attribute.Key("specprobe.engine") // the spec's engine: sglang, vllm, llamacpp, …
	KeyPosition  = attribute.Key("specprobe.spec.position")
	KeyPID       = semconv.ProcessPIDKey
	KeyPod       = semconv.K8SPodNameKey
	KeyNamespace = semconv.K8SNamespaceNameKey
	KeyStage     = spanschema.KeyStage
)

// maxPositions bounds the positions counted: past it a verify's accepted
// drafts are not counted by position (a forged count cannot make a series
// per integer).
const maxPositions = 32

// Metrics holds the instruments. The histograms are the SDK's (they keep
// exemplars); the counters are each target's own counts, which the SDK reads
// at each collection: an SDK Add per verify and draft position cost more
// than everything else a step costs the daemon.
type Metrics struct {
	acceptLen, stageDur metric.Float64Histogram
	perPos, verifies    metric.Int64ObservableCounter
	accepted, drafted   metric.Int64ObservableCounter
	mu                  sync.Mutex
	targets             []*Target
}

// maxTargets bounds the targets whose counters are kept: past it the
// oldest go (processes long gone: far fewer are traced at once).
const maxTargets = 1024

// New makes the instruments on meter.
func New(meter metric.Meter) (*Metrics, error) {
	m := &Metrics{}
	var errs []error
	hist := func(in Instrument) metric.Float64Histogram {
		h, err := meter.Float64Histogram(in.Name, metric.WithUnit(in.Unit), metric.WithDescription(in.Description),
			metric.WithExplicitBucketBoundaries(in.Buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(in Instrument) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(in.Name, metric.WithUnit(in.Unit), metric.WithDescription(in.Description))
		errs = append(errs, err)
		return c
	}
	m.acceptLen, m.stageDur = hist(AcceptanceLength), hist(StageDuration)
	m.perPos, m.verifies = counter(AcceptedPerPosition), counter(Verifies)
	m.accepted, m.drafted = counter(AcceptedTokens), counter(DraftedTokens)
	_, err := meter.RegisterCallback(m.observe, m.perPos, m.verifies, m.accepted, m.drafted)
	errs = append(errs, err)
	return m, errors.Join(errs...)
}

func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.targets {
		c := &t.counts
		if !c.active.Load() {
			continue
		}
		o.ObserveInt64(m.verifies, c.verifies.Load(), t.set)
		o.ObserveInt64(m.accepted, c.accepted.Load(), t.set)
		o.ObserveInt64(m.drafted, c.drafted.Load(), t.set)
		for p := range int(c.positions.Load()) {
			o.ObserveInt64(m.perPos, c.perPos[p].Load(), t.pos[p])
		}
	}
	return nil
}

// Target is one traced process's series.
type Target struct {
	m      *Metrics
	attrs  []attribute.KeyValue
	set    metric.MeasurementOption
	stages map[string]metric.MeasurementOption
	pos    [maxPositions]metric.MeasurementOption
	counts counts
	// Calls already counted: a batched call reaches the sink once per
	// request it served, and counts once.
	seen map[callKey]bool
}

// counts are a target's counters, written by its session and read by the
// collection.
type counts struct {
	active                      atomic.Bool // a step was recorded
	verifies, accepted, drafted atomic.Int64
	perPos                      [maxPositions]atomic.Int64
	positions                   atomic.Int32 // positions with a series
}

type callKey struct {
	tid   uint32
	stage string
	end   uint64
}

// Target makes the series of one process: its engine, its PID and, in
// Kubernetes, its pod (extra: k8s.pod.name, k8s.namespace.name).
func (m *Metrics) Target(engine string, pid int, extra ...attribute.KeyValue) *Target {
	if m == nil {
		return nil
	}
	attrs := []attribute.KeyValue{KeyEngine.String(engine), KeyPID.Int(pid)}
	for _, kv := range extra {
		if kv.Key == KeyPod || kv.Key == KeyNamespace {
			attrs = append(attrs, kv)
		}
	}
	t := &Target{m: m, attrs: attrs, set: metric.WithAttributeSet(attribute.NewSet(attrs...)),
		stages: map[string]metric.MeasurementOption{}, seen: map[callKey]bool{}}
	for p := range t.pos {
		t.pos[p] = t.with(KeyPosition.Int(p))
	}
	m.mu.Lock()
	if len(m.targets) >= maxTargets {
		m.targets = append(m.targets[:0], m.targets[1:]...)
	}
	m.targets = append(m.targets, t)
	m.mu.Unlock()
	return t
}

func (t *Target) with(kv attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(t.attrs[:len(t.attrs):len(t.attrs)], kv)...))
}

// Step records one request's step. trace and span name the step's
// decode_loop span, the exemplar of its measurements; kept says whether
// its spans were exported (sampling): only those make exemplars.
func (t *Target) Step(s *spanbuilder.Step, tr spanrec.TraceID, span spanrec.SpanID, kept bool) {
	if t == nil {
		return
	}
	cfg := trace.SpanContextConfig{TraceID: trace.TraceID(tr), SpanID: trace.SpanID(span)}
	if kept {
		cfg.TraceFlags = trace.FlagsSampled
	}
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(cfg))
	var drafted, verifyDrafted int64
	haveVerifyDrafts := false
	var verify *spanbuilder.Call
	correct := int64(-1)
	for i := range s.Calls {
		c := &s.Calls[i]
		k := callKey{c.TID, c.Stage, c.EndBoot}
		if !t.seen[k] {
			if len(t.seen) >= 4096 {
				clear(t.seen) // older calls no longer come
			}
			t.seen[k] = true
			t.m.stageDur.Record(ctx, c.End.Sub(c.Start).Seconds(), t.stage(c.Stage))
			if c.Stage == spanschema.Verify {
				t.counts.verifies.Add(1)
			}
		}
		for _, v := range c.Values {
			switch {
			case v.Name == spanschema.ValueDrafts && c.Stage == spanschema.Verify:
				verifyDrafted, haveVerifyDrafts = verifyDrafted+v.V, true
			case v.Name == spanschema.ValueDrafts:
				drafted += v.V
			case v.Name == spanschema.ValueCorrect && c.Stage == spanschema.Verify:
				verify, correct = c, v.V
			}
		}
	}
	// One side of the drafts, as the live summary counts them: the
	// verify's where the spec reads them there, else the drafts'.
	if haveVerifyDrafts {
		drafted = verifyDrafted
	}
	if drafted > 0 {
		t.counts.drafted.Add(drafted)
	}
	if verify != nil {
		t.accepted(ctx, correct, drafted)
	}
	t.counts.active.Store(true)
}

// accepted records a verify's accepted count n of the step's drafts: its
// length, and the positions it accepted (each position below the drafts,
// where known, gets its series even when nothing there was accepted).
func (t *Target) accepted(ctx context.Context, n, drafts int64) {
	if n < 0 {
		return
	}
	t.m.acceptLen.Record(ctx, float64(n), t.set)
	t.counts.accepted.Add(n)
	for p := range min(n, maxPositions) {
		t.counts.perPos[p].Add(1)
	}
	if k := int32(min(max(n, drafts), maxPositions)); k > t.counts.positions.Load() {
		t.counts.positions.Store(k)
	}
}

func (t *Target) stage(name string) metric.MeasurementOption {
	o, ok := t.stages[name]
	if !ok {
		o = t.with(KeyStage.String(name))
		t.stages[name] = o
	}
	return o
}
