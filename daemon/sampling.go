package daemon

import (
	"encoding/binary"
	"math"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SamplingRateKey is the span attribute with the fraction of requests kept
// when the span's request was sampled: 0.25 means this request stands for four.
const SamplingRateKey = attribute.Key("specprobe.sampling.rate")

// traceStateKey carries the root's rate to its children, which the sampler
// sees only through the parent's span context.
const traceStateKey = "specprobe"

// Budget turns an event budget into a request sampling rate: past the
// budget, new requests are kept with probability budget/rate, all the spans
// of one request together (the decision is the root span's, by trace ID).
type Budget struct {
	limit float64
	rate  atomic.Uint64 // float64 bits
}

// NewBudget keeps every request while the events per second stay under
// limit; limit 0 never samples.
func NewBudget(limit int) *Budget {
	b := &Budget{limit: float64(limit)}
	b.rate.Store(math.Float64bits(1))
	return b
}

// Observe sets the rate from the events per second just measured. The rate
// moves at once, down or up: a burst is cut the next second, not later.
func (b *Budget) Observe(eventsPerSec float64) {
	r := 1.0
	if b.limit > 0 && eventsPerSec > b.limit {
		r = b.limit / eventsPerSec
	}
	b.rate.Store(math.Float64bits(r))
}

// Rate is the fraction of new requests kept now.
func (b *Budget) Rate() float64 { return math.Float64frombits(b.rate.Load()) }

// Sampler is the span sampler enforcing the budget.
func (b *Budget) Sampler() sdktrace.Sampler { return budgetSampler{b} }

type budgetSampler struct{ b *Budget }

func (s budgetSampler) Description() string { return "specprobe event budget" }

func (s budgetSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	parent := trace.SpanContextFromContext(p.ParentContext)
	if parent.IsValid() {
		if !parent.IsSampled() {
			return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: parent.TraceState()}
		}
		res := sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: parent.TraceState()}
		if r, err := strconv.ParseFloat(parent.TraceState().Get(traceStateKey), 64); err == nil {
			res.Attributes = []attribute.KeyValue{SamplingRateKey.Float64(r)}
		}
		return res
	}
	rate := s.b.Rate()
	// The trace ID is random: its low 63 bits against rate·2⁶³ keep the
	// same fraction TraceIDRatioBased would.
	x := binary.BigEndian.Uint64(p.TraceID[8:16]) >> 1
	if rate < 1 && float64(x) >= rate*(1<<63) {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	ts, _ := trace.TraceState{}.Insert(traceStateKey, strconv.FormatFloat(rate, 'g', 4, 64))
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts,
		Attributes: []attribute.KeyValue{SamplingRateKey.Float64(rate)}}
}
