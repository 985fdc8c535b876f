package daemon

import (
	"fmt"
	"math"
	"runtime/debug"
)

// memBudgets is what memory_limit pays for, split once at start, so that
// a full node cannot take the daemon past the limit however busy its
// targets are and however slow its collector.
type memBudgets struct {
	limit   int64  // memory_limit, or GOMEMLIMIT where it is unset; 0: none
	goLimit int64  // the Go runtime's soft limit (below)
	queue   int64  // bytes of queued spans (spanrec's Cost) per exporter, all targets together
	ring    uint32 // each session's ring buffer, in bytes
}

// Ring buffers. A native event takes 64 bytes, a Python call's record up to
// 16 KiB; the reader is woken each 64 KiB and drains every 100 ms anyway.
// 256 KiB leaves three wakeups' worth for a reader that is late; 4 MiB is
// what attach uses.
const (
	minRing = 256 << 10
	maxRing = 4 << 20
	// Without any limit the daemon sizes as for this one (and sets no Go
	// limit): a node's many targets still cannot queue without bound.
	unlimited = 256 << 20
	// The binary's own pages in VmRSS (23 MiB measured, idle): file pages,
	// outside the Go runtime's count.
	binaryPages = 24 << 20
)

// budgets splits limit over procs sessions and the exporters:
//   - a sixteenth to the ring buffers, procs of them (the largest power of 2
//     that fits, between minRing and maxRing);
//   - a quarter to the span queues, split over the exporters, each share a
//     Budget of bytes all sessions' queues for that exporter draw from: a
//     stalled collector sheds spans, not memory. Queued spans are live heap,
//     which the collector lets grow to twice over between collections: half
//     the limit at most;
//   - the Go runtime's soft limit, what the rings and the binary leave: VmRSS
//     counts each ring twice (the reader maps its pages twice) and the
//     binary's pages, neither of which the runtime counts. It bounds the
//     collector's slack; the queues' bound is what holds the heap.
func budgets(limit int64, procs, exporters int) memBudgets {
	procs, exporters = max(1, procs), max(1, exporters)
	size := limit
	if limit <= 0 {
		limit, size = 0, unlimited
	}
	ring := int64(minRing)
	for ring*2 <= maxRing && ring*2*int64(procs) <= size/16 {
		ring *= 2
	}
	b := memBudgets{limit: limit, ring: uint32(ring), queue: size / 4 / int64(exporters)}
	if limit > 0 {
		b.goLimit = max(limit/2, limit-2*ring*int64(procs)-binaryPages)
	}
	return b
}

// memoryLimit is memory_limit, else GOMEMLIMIT (as the runtime read it),
// else 0.
func memoryLimit(configured int64) int64 {
	if configured > 0 {
		return configured
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	return 0
}

func (b memBudgets) String() string {
	const MiB = 1 << 20
	limit := "no memory_limit or GOMEMLIMIT (sized as for 256 MiB, no Go limit)"
	if b.limit > 0 {
		limit = fmt.Sprintf("limit %.0f MiB, Go limit %.0f MiB", float64(b.limit)/MiB, float64(b.goLimit)/MiB)
	}
	return fmt.Sprintf("%s; per target a %d KiB ring buffer; %.1f MiB of queued spans per exporter, all targets together", limit, b.ring>>10, float64(b.queue)/MiB)
}
