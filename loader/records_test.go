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
	r, str, ok := stageRecord(raw)
	if !ok || r.Site != 1 || r.Values[0] != 7 || cString(str) != "req-42" {
		t.Errorf("string record: %+v %q %v", r, cString(str), ok)
	}
	short := raw[:unsafe.Sizeof(bpf.StageEvent{})]
	if r, str, ok := stageRecord(short); !ok || r.Values[0] != 7 || str != nil {
		t.Errorf("plain record: %+v %v %v", r, str, ok)
	}
	if _, _, ok := stageRecord(raw[:40]); ok {
		t.Error("a 40-byte record decoded")
	}
	v := &probes.Value{Type: probes.TypeString}
	if got := requestID(v, 0, nil); got != "" {
		t.Errorf("a string read without room gave %q", got)
	}
}
