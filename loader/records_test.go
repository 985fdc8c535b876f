package loader

import (
	"testing"
	"unsafe"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/probes"
)

// A site that reads no string sends the 56-byte record, one that reads a
// string the record with the string's room after it; both decode, and a
// record cut short decodes to nothing.
func TestStageRecordSizes(t *testing.T) {
	if n := unsafe.Sizeof(bpf.StageEvent{}); n != 56 {
		t.Errorf("event is %d bytes, want 56 (one cache line with the ring's header)", n)
	}
	var withStr bpf.StageEventStr
	withStr.Ev.Site, withStr.Ev.Values[0] = 1, 7
	for i, c := range "req-42" {
		withStr.Str[i] = int8(c)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&withStr)), unsafe.Sizeof(withStr))
	r, str, snap, ok := stageRecord(raw)
	if !ok || snap != nil || r.Site != 1 || r.Values[0] != 7 || cString(str) != "req-42" {
		t.Errorf("string record: %+v %q %v", r, cString(str), ok)
	}
	short := raw[:unsafe.Sizeof(bpf.StageEvent{})]
	if r, str, _, ok := stageRecord(short); !ok || r.Values[0] != 7 || str != nil {
		t.Errorf("plain record: %+v %v %v", r, str, ok)
	}
	if _, _, _, ok := stageRecord(raw[:40]); ok {
		t.Error("a 40-byte record decoded")
	}
}

// With CUDA probes armed a record carries the thread's counters after the
// event, then the string's room when the site reads one; a record cut
// before the counters end decodes to nothing.
func TestStageRecordCUDA(t *testing.T) {
	var r bpf.StageEventCuda
	r.Ev.Site, r.Ev.Ext, r.Ev.Values[0] = 2, extCUDA, 9
	r.Cuda = bpf.StageCudaSnap{SyncNs: 1234, Syncs: 3, Launches: 40, Graphs: 5}
	copy(r.Str[:], []int8{'r', '1', 0})
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))
	ev, str, snap, ok := stageRecord(raw)
	if !ok || ev.Site != 2 || snap == nil || *snap != r.Cuda || cString(str) != "r1" {
		t.Errorf("with a string: %+v %+v %q %v", ev, snap, cString(str), ok)
	}
	if cudaRecordLen != 80 {
		t.Errorf("a CUDA record without a string is %d bytes, want 80", cudaRecordLen)
	}
	ev, str, snap, ok = stageRecord(raw[:cudaRecordLen])
	if !ok || ev.Values[0] != 9 || str != nil || snap == nil || snap.Launches != 40 {
		t.Errorf("without a string: %+v %+v %v %v", ev, snap, str, ok)
	}
	if _, _, _, ok := stageRecord(raw[:cudaRecordLen-1]); ok {
		t.Error("a CUDA record cut short decoded")
	}
	if c := cudaCount(snap); !c.Valid || c.SyncNs != 1234 || c.Syncs != 3 || c.Graphs != 5 {
		t.Errorf("counters %+v", c)
	}
	if c := cudaCount(nil); c.Valid {
		t.Error("no counters read as valid")
	}
	v := &probes.Value{Type: probes.TypeString}
	if got := requestID(v, 0, nil); got != "" {
		t.Errorf("a string read without room gave %q", got)
	}
}
