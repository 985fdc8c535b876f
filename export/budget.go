package export

import (
	"sync"

	"github.com/specprobe/specprobe/spanrec"
)

// Budget is bytes of queued spans (spanrec's Cost) that several queues
// share: the daemon gives each exporter one for all its targets' queues,
// its share of memory_limit. Once a push finds it spent, it sheds every
// push until a quarter of it is free again, so that what queues keep
// comes in runs of steps: kept steps scattered among shed ones would each
// keep the chunk of spans they were carved from.
type Budget struct {
	limit int64

	mu       sync.Mutex
	used     int64
	shedding bool
}

// NewBudget holds queued spans to bytes.
func NewBudget(bytes int64) *Budget { return &Budget{limit: bytes} }

// take reserves n bytes, or says there is no room.
func (b *Budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shedding && b.used > b.limit-b.limit/4 {
		return false
	}
	if b.used+n > b.limit {
		b.shedding = true
		return false
	}
	b.used, b.shedding = b.used+n, false
	return true
}

// give returns bytes taken.
func (b *Budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Used is the bytes queued now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

func cost(spans []*spanrec.Span) int64 {
	var n int64
	for _, s := range spans {
		n += s.Cost()
	}
	return n
}
