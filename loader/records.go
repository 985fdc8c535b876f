package loader

import (
	"unsafe"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/spanbuilder"
)

// Ring-buffer records, decoded with the types bpf2go generated from
// bpf/stage.c: every record starts with the same header, whose kind byte
// says which struct it is (TestRecordLayout ties the offsets to the C).

// Kinds of bpf/stage.c's enum kind (generated: bpf2go -type kind).
const (
	kindEntry  = uint8(bpf.StageKindKIND_ENTRY)
	kindExit   = uint8(bpf.StageKindKIND_EXIT)
	kindWatch  = uint8(bpf.StageKindKIND_WATCH)
	kindPyData = uint8(bpf.StageKindKIND_PYDATA)
)

// kindOffset is where the kind byte sits: after boot_ns, pid, tid, site.
const kindOffset = 20

func recordKind(raw []byte) (uint8, bool) {
	if len(raw) <= kindOffset {
		return 0, false
	}
	return raw[kindOffset], true
}

// view casts raw to a *T when it holds one, aligned as T needs: the ring
// buffer hands out 8-byte aligned records, and a copy (an unaligned slice)
// falls back to a copy of the bytes.
func view[T any](raw []byte) (*T, bool) {
	var zero T
	n := int(unsafe.Sizeof(zero))
	if len(raw) < n {
		return nil, false
	}
	if uintptr(unsafe.Pointer(&raw[0]))%unsafe.Alignof(zero) != 0 {
		t := new(T)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(t)), n), raw)
		return t, true
	}
	return (*T)(unsafe.Pointer(&raw[0])), true
}

// extCUDA is bpf/stage.c's EXT_CUDA: the thread's CUDA counters follow
// the event (event_cuda).
const extCUDA = uint8(bpf.StageEventExtEXT_CUDA)

// cudaRecordLen is the length of an event_cuda record whose site reads
// no string: it ends where the string's room would begin.
var cudaRecordLen = int(unsafe.Offsetof(bpf.StageEventCuda{}.Str))

// stageRecord is a native stage's record and, for a site that reads a
// string, the string's room after it (event_str), else nil; and the
// thread's CUDA counters when the record carries them.
func stageRecord(raw []byte) (*bpf.StageEvent, []int8, *bpf.StageCudaSnap, bool) {
	ev, ok := view[bpf.StageEvent](raw)
	if ok && ev.Ext&extCUDA != 0 {
		return cudaRecord(raw)
	}
	r, str, ok := plainRecord(raw)
	return r, str, nil, ok
}

func cudaRecord(raw []byte) (*bpf.StageEvent, []int8, *bpf.StageCudaSnap, bool) {
	if len(raw) >= int(unsafe.Sizeof(bpf.StageEventCuda{})) {
		r, ok := view[bpf.StageEventCuda](raw)
		return &r.Ev, r.Str[:], &r.Cuda, ok
	}
	ev, ok1 := view[bpf.StageEvent](raw)
	snap, ok2 := view[bpf.StageCudaSnap](raw[min(cudaSnapOffset, len(raw)):min(cudaRecordLen, len(raw))])
	return ev, nil, snap, ok1 && ok2 && len(raw) >= cudaRecordLen
}

var cudaSnapOffset = int(unsafe.Offsetof(bpf.StageEventCuda{}.Cuda))

func plainRecord(raw []byte) (*bpf.StageEvent, []int8, bool) {
	if len(raw) >= int(unsafe.Sizeof(bpf.StageEventStr{})) {
		r, ok := view[bpf.StageEventStr](raw)
		return &r.Ev, r.Str[:], ok
	}
	r, ok := view[bpf.StageEvent](raw)
	return r, nil, ok
}

// watchRecord is a watchpoint hit and the payload after it.
func watchRecord(raw []byte) (*bpf.StageWatchEvent, []byte, bool) {
	w, ok := view[bpf.StageWatchEvent](raw)
	if !ok {
		return nil, nil, false
	}
	hdr := int(unsafe.Sizeof(*w))
	if int(w.Len) > len(raw)-hdr {
		return nil, nil, false
	}
	return w, raw[hdr : hdr+int(w.Len)], true
}

// cudaCount is a record's CUDA counters for the span builder; nil: none.
func cudaCount(c *bpf.StageCudaSnap) spanbuilder.CUDACount {
	if c == nil {
		return spanbuilder.CUDACount{}
	}
	return spanbuilder.CUDACount{Valid: true, SyncNs: c.SyncNs, Syncs: c.Syncs, Launches: c.Launches, Graphs: c.Graphs}
}
