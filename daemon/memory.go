package daemon

import (
	"fmt"
	"math"
	"runtime/debug"
)

// memBudgets is what memory_limit pays for, split once at start over the
// processes the daemon may trace at once (max_processes), so that a full
// node cannot take more than the limit however busy its targets are.
type memBudgets struct {
	limit   int64  // memory_limit, or GOMEMLIMIT where it is unset; 0: none
	goLimit int64  // the Go runtime's soft limit: limit less the rings
	queue   int    // spans waiting for each exporter, per session
	ring    uint32 // each session's ring buffer, in bytes
}

// Bytes a queued span holds: its record (~150), its own attributes (~64
// each, 2 to 5 of them) and its share of the chunk it was carved from.
const spanBytes = 512

// Ring buffers. A native event takes 64 bytes, a Python call's record up to
// 16 KiB; the reader is woken each 64 KiB and drains every 100 ms anyway.
// 256 KiB leaves three wakeups' worth for a reader that is late; 4 MiB is
// what attach uses.
const (
	minRing = 256 << 10
	maxRing = 4 << 20
	// A queue holds at least one export batch.
	minQueue = 512
	// Without any limit the daemon sizes as for this one (and sets no Go
	// limit): a node's many targets still cannot queue without bound.
	unlimited = 256 << 20
)

// budgets splits limit over procs sessions sending to exporters each: a
// sixteenth to the ring buffers (an eighth of the RSS: the reader maps each
// ring's pages twice) (the largest power of 2 that fits, between
// minRing and maxRing), a quarter to the span queues; the Go runtime's soft
// limit is what the rings leave, since their pages are the kernel's (charged
// to the daemon's cgroup, outside the Go heap).
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
	b := memBudgets{limit: limit, ring: uint32(ring),
		queue: max(minQueue, int(size/4/spanBytes/int64(procs*exporters)))}
	if limit > 0 {
		b.goLimit = max(limit/2, limit-ring*int64(procs))
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
	return fmt.Sprintf("%s; per target a %d KiB ring buffer and %d spans queued per exporter", limit, b.ring>>10, b.queue)
}
