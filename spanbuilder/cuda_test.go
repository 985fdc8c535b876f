package spanbuilder_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/specprobe/specprobe/spanbuilder"
)

// cu is a thread's counters: blocked ns, syncs, launches, graphs.
func cu(ns uint64, syncs, launches, graphs uint32) spanbuilder.CUDACount {
	return spanbuilder.CUDACount{Valid: true, SyncNs: ns, Syncs: syncs, Launches: launches, Graphs: graphs}
}

func with(e *spanbuilder.Event, c spanbuilder.CUDACount) *spanbuilder.Event {
	e.CUDA = c
	return e
}

func use(ns int64, syncs, launches, graphs int64) spanbuilder.CUDAUse {
	return spanbuilder.CUDAUse{Known: true, Sync: time.Duration(ns), Syncs: syncs, Launches: launches, Graphs: graphs}
}

// Each call gets the difference of its boundaries' counters; the step,
// what happened between its stages (a draft nested in the verify is the
// verify's already; an accept, which has no span, counts as outside).
func TestCUDAUse(t *testing.T) {
	b, rec := newBuilder()
	add(b,
		with(enter(100, 1, siteDraft, "r1"), cu(1000, 1, 10, 0)),
		with(exit(200, 1, siteDraft, "r1"), cu(1000, 1, 14, 0)), // 4 launches, no sync
		// between: 1 sync of 50ns, 2 launches
		with(enter(300, 1, siteVerify, ""), cu(1050, 2, 16, 0)),
		with(enter(310, 1, siteDraft2, "r1"), cu(1050, 2, 17, 0)),
		with(exit(320, 1, siteDraft2, "r1"), cu(1060, 3, 18, 0)), // nested: 10ns, 1 sync, 1 launch
		with(exit(400, 1, siteVerify, ""), cu(1500, 4, 20, 1)),   // 450ns, 2 syncs, 4 launches, 1 graph
		with(enter(410, 1, siteAccept, "r1"), cu(1500, 4, 20, 1)),
		with(exit(420, 1, siteAccept, "r1"), cu(1600, 5, 20, 1)), // the accept's sync: outside
		with(enter(500, 1, siteExtend, ""), cu(1600, 5, 21, 1)),
		with(exit(600, 1, siteExtend, ""), cu(1700, 6, 22, 1)),
		// what comes after the step's last stage is no part of it
		with(enter(700, 1, siteDraft, "r1"), cu(9000, 9, 99, 9)),
	)
	if len(rec.steps) != 1 {
		t.Fatalf("%d steps", len(rec.steps))
	}
	s := rec.steps[0]
	want := map[string][]spanbuilder.CUDAUse{
		"draft":        {use(0, 0, 4, 0), use(10, 1, 1, 0)},
		"verify":       {use(450, 2, 4, 1)},
		"draft_extend": {use(100, 1, 1, 0)},
	}
	for _, c := range s.Calls {
		w := want[c.Stage]
		if len(w) == 0 {
			t.Fatalf("unexpected %s call", c.Stage)
		}
		if c.CUDA != w[0] {
			t.Errorf("%s at %s: %+v, want %+v", c.Stage, c.Start, c.CUDA, w[0])
		}
		want[c.Stage] = w[1:]
	}
	// window 100..600: 700ns, 5 syncs, 12 launches, 1 graph; stages 550, 3, 9, 1.
	if w := use(150, 2, 3, 0); s.CUDA != w {
		t.Errorf("outside the stages %+v, want %+v", s.CUDA, w)
	}
	if u := b.Stats.CUDA["verify"]; u != use(450, 2, 4, 1) {
		t.Errorf("stats verify %+v", u)
	}
	if u := b.Stats.CUDA[spanbuilder.OutsideStages]; u != use(150, 2, 3, 0) {
		t.Errorf("stats outside %+v", u)
	}
}

// Without counters, or with counters that went back (the thread's entry
// pushed out of the kernel's map), nothing is known: no attributes rather
// than a wrong number. 32-bit counts that wrapped still subtract.
func TestCUDASince(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to spanbuilder.CUDACount
		want     spanbuilder.CUDAUse
	}{
		{"no counters", spanbuilder.CUDACount{}, spanbuilder.CUDACount{}, spanbuilder.CUDAUse{}},
		{"entry without", spanbuilder.CUDACount{}, cu(5, 1, 1, 1), spanbuilder.CUDAUse{}},
		{"went back", cu(5000, 3, 3, 3), cu(10, 1, 1, 1), spanbuilder.CUDAUse{}},
		{"plain", cu(10, 1, 2, 3), cu(60, 2, 5, 3), use(50, 1, 3, 0)},
		{"wrapped", cu(10, 1, 0xfffffffe, 0), cu(10, 1, 3, 0), use(0, 0, 5, 0)},
	} {
		if got := tc.to.Since(tc.from); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if kvs := (spanbuilder.CUDAUse{}).AppendAttrs(nil); len(kvs) != 0 {
		t.Errorf("unknown use made attributes %v", kvs)
	}
	kvs := use(1_500_000, 2, 7, 1).AppendAttrs(nil)
	got := map[string]any{}
	for _, kv := range kvs {
		got[string(kv.Key)] = kv.Value.AsInterface()
	}
	want := map[string]any{"specprobe.cuda.sync.duration": 0.0015, "specprobe.cuda.sync.count": int64(2),
		"specprobe.cuda.launches": int64(7), "specprobe.cuda.graph_launches": int64(1)}
	if len(got) != len(want) {
		t.Fatalf("attributes %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// The OTel sink puts a call's use on its stage span and the step's
// outside use on decode_loop; a call whose use is unknown gets none.
func TestOTelSinkCUDA(t *testing.T) {
	sink, sr := newOTel(t)
	sink.Step(spanbuilder.Step{RequestID: "r", TID: 1, Start: at(0), End: at(100), CUDA: use(2_000_000, 1, 2, 0),
		Calls: []spanbuilder.Call{
			{Stage: "draft", Start: at(0), End: at(10)},
			{Stage: "verify", Start: at(20), End: at(100), CUDA: use(3_000_000, 2, 5, 1)},
		}})
	sink.Close()
	ended := byName(sr.Ended())
	for name, want := range map[string][]any{"decode_loop": {0.002, 1, 2, 0}, "spec_verify": {0.003, 2, 5, 1}} {
		a := attrs(one(t, ended, name))
		got := []any{a["specprobe.cuda.sync.duration"].AsFloat64(), int(a["specprobe.cuda.sync.count"].AsInt64()),
			int(a["specprobe.cuda.launches"].AsInt64()), int(a["specprobe.cuda.graph_launches"].AsInt64())}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if _, ok := attrs(one(t, ended, "spec_draft"))["specprobe.cuda.launches"]; ok {
		t.Error("a call of unknown use carries CUDA attributes")
	}
}
