package spanbuilder_test

import (
	"reflect"
	"testing"

	"github.com/specprobe/specprobe/spanbuilder"
)

// An SGLang batch draft on an empty batch (main's EAGLE V2 drafts on an idle
// batch in _forward_dp_spec_prefill_coordination and on an idle DP rank): its
// read finds no request, so it serves none and makes no step or span, and the
// steps around it keep their own calls.
func TestEmptyBatchDraftServesNone(t *testing.T) {
	sites := []spanbuilder.Site{
		{Stage: "draft", Batch: true},
		{Stage: "verify", Batch: true},
		{Stage: "draft_extend", Batch: true},
	}
	rec := &recorder{}
	b := spanbuilder.New(sites, spanbuilder.Clock{OffsetNs: offset}, rec)
	step := func(t0 uint64, rids ...string) {
		for i := range sites {
			at := t0 + uint64(20*i)
			add(b, enter(at, 1, i, ""), serving(exit(at+10, 1, i, ""), rids...))
		}
	}
	step(100, "r1", "r2")
	// The empty batch's draft: its requests were read, and there are none
	// (tracer/pyreads.go gives an empty, non-nil list).
	idle := exit(210, 1, 0, "")
	idle.Requests = []string{}
	add(b, enter(200, 1, 0, ""), idle)
	step(300, "r1", "r2")
	b.Flush(1000, "end")
	type got struct {
		rid    string
		starts []uint64
	}
	var steps []got
	for _, st := range rec.steps {
		g := got{rid: st.RequestID}
		for _, c := range st.Calls {
			g.starts = append(g.starts, uint64(c.Start.UnixNano()-offset))
		}
		steps = append(steps, g)
	}
	want := []got{
		{"r1", []uint64{100, 120, 140}}, {"r2", []uint64{100, 120, 140}},
		{"r1", []uint64{300, 320, 340}}, {"r2", []uint64{300, 320, 340}},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("steps %+v, want %+v", steps, want)
	}
}
