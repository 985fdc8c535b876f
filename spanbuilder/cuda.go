package spanbuilder

import (
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/spanschema"
)

// CUDACount is a thread's CUDA driver counters as one stage boundary saw
// them (bpf/cuda.h): monotonic while the thread lives, so what happened
// between two boundaries is their difference.
type CUDACount struct {
	Valid    bool // the boundary carried counters (CUDA probes armed)
	SyncNs   uint64
	Syncs    uint32
	Launches uint32
	Graphs   uint32
}

// CUDAUse is what a thread did in the CUDA driver over an interval.
type CUDAUse struct {
	Known    bool
	Sync     time.Duration // blocked in synchronizing calls
	Syncs    int64
	Launches int64
	Graphs   int64
}

// Since is what happened between from and c. Unknown when either lacks
// counters or they went back (the thread's entry was pushed out of the
// kernel's map and started again). The 32-bit counts wrap; their
// difference does not.
func (c CUDACount) Since(from CUDACount) CUDAUse {
	if !c.Valid || !from.Valid || c.SyncNs < from.SyncNs {
		return CUDAUse{}
	}
	return CUDAUse{Known: true, Sync: time.Duration(c.SyncNs - from.SyncNs), Syncs: int64(c.Syncs - from.Syncs),
		Launches: int64(c.Launches - from.Launches), Graphs: int64(c.Graphs - from.Graphs)}
}

// plus is the counters after use u since c (invalid when u is unknown).
func (c CUDACount) plus(u CUDAUse) CUDACount {
	if !u.Known {
		return CUDACount{}
	}
	return CUDACount{Valid: true, SyncNs: c.SyncNs + uint64(u.Sync), Syncs: c.Syncs + uint32(u.Syncs),
		Launches: c.Launches + uint32(u.Launches), Graphs: c.Graphs + uint32(u.Graphs)}
}

func (u CUDAUse) minus(v CUDAUse) CUDAUse {
	if !u.Known || !v.Known {
		return CUDAUse{}
	}
	return CUDAUse{Known: true, Sync: u.Sync - v.Sync, Syncs: u.Syncs - v.Syncs, Launches: u.Launches - v.Launches, Graphs: u.Graphs - v.Graphs}
}

func (u CUDAUse) add(v CUDAUse) CUDAUse {
	return CUDAUse{Known: u.Known && v.Known, Sync: u.Sync + v.Sync, Syncs: u.Syncs + v.Syncs, Launches: u.Launches + v.Launches, Graphs: u.Graphs + v.Graphs}
}

// attrs is how many attributes AppendAttrs adds.
func (u CUDAUse) attrs() int {
	if u.Known {
		return 4
	}
	return 0
}

// AppendAttrs adds the four specprobe.cuda.* attributes when u is known.
func (u CUDAUse) AppendAttrs(kvs []attribute.KeyValue) []attribute.KeyValue {
	if !u.Known {
		return kvs
	}
	return append(kvs, spanschema.KeyCUDASyncDuration.Float64(u.Sync.Seconds()), spanschema.KeyCUDASyncCount.Int64(u.Syncs),
		spanschema.KeyCUDALaunches.Int64(u.Launches), spanschema.KeyCUDAGraphs.Int64(u.Graphs))
}

// outsideStages is what a thread did in the driver during its step (from
// its first stage's entry to its last stage's exit) outside every stage:
// the whole window's use less that of each top-level call (a call nested
// in another is inside it already). Accept stages, which make no span of
// their own, count as outside.
func outsideStages(calls []Call) CUDAUse {
	if len(calls) == 0 || !calls[0].cudaFrom.Valid {
		return CUDAUse{} // no CUDA probes: nothing to allocate for
	}
	var top []*Call
	for i := range calls {
		if calls[i].Stage != spanschema.Accept {
			top = append(top, &calls[i])
		}
	}
	if len(top) == 0 {
		return CUDAUse{}
	}
	// Outer calls first: by start, the longer first at the same start.
	slices.SortStableFunc(top, func(a, b *Call) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return b.End.Compare(a.End)
	})
	first, last := top[0], top[0]
	inside := CUDAUse{Known: true}
	var end time.Time
	for _, c := range top {
		if c.End.After(last.End) {
			last = c
		}
		if c.Start.Before(end) {
			continue // nested in the call before
		}
		end = c.End
		inside = inside.add(c.CUDA)
	}
	return last.cudaFrom.plus(last.CUDA).Since(first.cudaFrom).minus(inside)
}
