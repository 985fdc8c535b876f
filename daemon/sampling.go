package daemon

import (
	"encoding/binary"
	"math"
	"sync/atomic"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
)

// SamplingRateKey is the span attribute with the fraction of requests kept
// when the span's request was sampled: 0.25 means this request stands for four.
const SamplingRateKey = spanschema.KeySamplingRate

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

// Sampler is the request sampler enforcing the budget.
func (b *Budget) Sampler() spanbuilder.Sampler { return budgetSampler{b} }

type budgetSampler struct{ b *Budget }

// Sample keeps a new request with probability Rate(): the trace id is
// random, so its low 63 bits against rate·2⁶³ keep that fraction, as
// OpenTelemetry's TraceIDRatioBased does. Every span of a request kept
// says the rate it was kept at.
func (s budgetSampler) Sample(id spanrec.TraceID) (bool, float64) {
	rate := s.b.Rate()
	x := binary.BigEndian.Uint64(id[8:16]) >> 1
	return rate >= 1 || float64(x) < rate*(1<<63), rate
}
