package loader

import (
	"reflect"
	"testing"

	"github.com/specprobe/specprobe/pyproc"
)

// Every way a spec names an argument resolves against the function the
// process runs: a name it has, the first of several it has, a position of
// its signature; anything else is refused with the names it has, as a
// signature (self, batch, *, bs) and its other locals.
func TestResolveArgs(t *testing.T) {
	slots := func(args, kwonly int, varargs, varkw bool, names ...string) *pyproc.CodeSlots {
		return &pyproc.CodeSlots{Names: names, Cell: make([]bool, len(names)), ArgCount: args, KwOnlyArgCount: kwonly, VarArgs: varargs, VarKeywords: varkw}
	}
	today := slots(2, 0, false, false, "self", "batch", "out")               // draft(self, batch)
	autumn := slots(2, 0, false, false, "self", "model_worker_batch")        // draft(self, model_worker_batch)
	kwonly := slots(1, 2, false, false, "self", "batch", "bs", "proposal")   // propose(self, *, batch, bs)
	star := slots(2, 1, true, true, "self", "batch", "mode", "args", "kw")   // f(self, batch, *args, mode, **kw)
	py310 := slots(2, 0, false, false, "self", "batch", "batch")             // 3.10: batch captured, named again as a cell
	caller := slots(3, 0, false, false, "self", "batch", "result", "counts") // process_batch_result_decode(self, batch, result)
	for _, tc := range []struct {
		name, stage string
		code        *pyproc.CodeSlots
		want        string // the requests' arg once resolved
		err         string
	}{
		{"a name it has", "requests: {arg: batch, path: reqs}", today, "batch", ""},
		{"a local", "requests: {arg: out, path: reqs}", today, "out", ""},
		{"first of several, today", "requests: {arg: [batch, model_worker_batch], path: reqs}", today, "batch", ""},
		{"first of several, autumn", "requests: {arg: [batch, model_worker_batch], path: reqs}", autumn, "model_worker_batch", ""},
		{"position 1", "requests: {arg: 1, path: reqs}", autumn, "model_worker_batch", ""},
		{"position 0 is self", "requests: {arg: 0, id: rid}", today, "self", ""},
		{"3.10 cell named twice", "requests: {arg: batch, path: reqs}", py310, "batch", ""},
		{"a name it lacks", "requests: {arg: model_worker_batch, path: reqs}", today, "",
			"stage verify: C.f has no argument model_worker_batch (its arguments: self, batch; other locals: out)"},
		{"none of several", "requests: {arg: [forward_batch, fb], path: reqs}", autumn, "",
			"stage verify: C.f has none of the arguments forward_batch, fb (its arguments: self, model_worker_batch)"},
		{"past the positional ones", "requests: {arg: 2, path: reqs}", today, "",
			"stage verify: C.f has no positional argument 2 (its arguments: self, batch; other locals: out)"},
		{"keyword-only has no position", "requests: {arg: 1, path: reqs}", kwonly, "",
			"stage verify: C.f has no positional argument 1 (its arguments: self, *, batch, bs; other locals: proposal)"},
		{"*args and **kwargs", "requests: {arg: batches, path: reqs}", star, "",
			"stage verify: C.f has no argument batches (its arguments: self, batch, *args, mode, **kw)"},
		{"when checked too", "requests: {arg: batch, path: reqs}\n    when: {arg: mode, path: m, equals: 2}", today, "",
			"stage verify: C.f has no argument mode (its arguments: self, batch; other locals: out)"},
		{"the return value", "requests: {arg: batch, path: reqs}\n    accepted: {arg: return, path: \"[*]\"}", today, "batch", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := spec(t, "  verify:\n    module: m\n    qualname: C.f\n    "+tc.stage+"\n").Stages["verify"]
			before := *st.Requests
			got, err := ResolveArgs(st, tc.code, nil, "")
			if tc.err != "" {
				var missing *MissingNameError
				if err == nil || err.Error() != tc.err || !errorsAs(err, &missing) {
					t.Fatalf("err %v\nwant %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Requests.Arg != tc.want {
				t.Errorf("arg %q, want %q", got.Requests.Arg, tc.want)
			}
			if !reflect.DeepEqual(*st.Requests, before) {
				t.Errorf("the spec's stage was changed: %+v", st.Requests)
			}
			// Resolved again (a replaced code object), the choice still decides.
			if again, err := ResolveArgs(got, autumn, nil, ""); tc.name == "first of several, today" && (err != nil || again.Requests.Arg != "model_worker_batch") {
				t.Errorf("resolved again against the autumn shape: %v %v", again, err)
			}
		})
	}
	// An accept stage's reads come from its read_from frame.
	st := spec(t, "  verify:\n    module: m\n    qualname: C.v\n  accept:\n    module: m\n    qualname: P.resolve\n    read_from: P.process\n"+
		"    requests: {arg: [batch, model_worker_batch], path: \"reqs[*]\", id: rid}\n    accepted: {arg: result, path: \"counts[*]\"}\n").Stages["accept"]
	got, err := ResolveArgs(st, today, caller, "P.process")
	if err != nil || got.Requests.Arg != "batch" || got.Accepted.Arg != "result" {
		t.Errorf("read_from: %+v %+v %v", got.Requests, got.Accepted, err)
	}
	_, err = ResolveArgs(st, caller, today, "P.process")
	if want := "stage accept: its read_from P.process has no argument result (its arguments: self, batch; other locals: out)"; err == nil || err.Error() != want {
		t.Errorf("read_from lacking result: %v\nwant %s", err, want)
	}
}
