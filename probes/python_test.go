package probes

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParsePythonStage(t *testing.T) {
	s, err := Parse("py.yaml", []byte(`engine: sglang
stages:
  verify:
    module: sglang.srt.speculative.eagle_worker_v2
    qualname: EAGLEWorkerV2.verify
    requests: {arg: batch, path: "reqs[*]", id: rid}
  draft:
    module: sglang.srt.speculative.eagle_worker_v2
    qualname: EagleDraftWorker.draft
`))
	if err != nil {
		t.Fatal(err)
	}
	v := s.Stages[Verify]
	if !v.IsPython() || v.Module != "sglang.srt.speculative.eagle_worker_v2" || v.Qualname != "EAGLEWorkerV2.verify" || v.Scope != ScopeBatch {
		t.Errorf("verify: %+v", v)
	}
	if r := v.Requests; r == nil || r.Arg != "batch" || r.Path != "reqs[*]" || r.ID != "rid" || r.Line != 6 {
		t.Errorf("requests: %+v", r)
	}
	if d := s.Stages[Draft]; !d.IsPython() || d.Requests != nil {
		t.Errorf("draft: %+v", d)
	}
}

// A request path may be left out (the argument holds the requests) or end
// in one id (a call that serves one request).
func TestRequestIDPath(t *testing.T) {
	for _, c := range []struct {
		r    PyRequests
		want string
	}{
		{PyRequests{Arg: "batch", Path: "reqs[*]", ID: "rid"}, "reqs[*].rid"},
		{PyRequests{Arg: "batch", Path: "req_ids"}, "req_ids"},
		{PyRequests{Arg: "self", ID: "path"}, "path"},
		{PyRequests{Arg: "rid"}, ""},
	} {
		if got := c.r.IDPath(); got != c.want {
			t.Errorf("%+v: IDPath %q, want %q", c.r, got, c.want)
		}
	}
}

func TestParsePythonStageErrors(t *testing.T) {
	for _, c := range []struct{ stage, want string }{
		{"module: a.b\n    qualname: C.f\n    symbol: f", "py.yaml:6: stages.verify.symbol: a Python stage (module + qualname) has no symbol"},
		{"module: a.b", "py.yaml:4: stages.verify: missing qualname"},
		{"qualname: C.f\n    binary: x\n    symbol: f\n    scope: batch", "py.yaml:4: stages.verify: qualname needs module"},
		{"module: a..b\n    qualname: C.f", "py.yaml:4: stages.verify.module: \"a..b\" is not a dotted module name"},
		{"module: a.b\n    qualname: C.f\n    scope: request", "py.yaml:6: stages.verify.scope: Python stages are batch stages"},
		{"module: a.b\n    qualname: C.f\n    requests: {path: reqs, id: rid}", "py.yaml:6: stages.verify.requests: missing arg"},
		{"module: a.b\n    qualname: C.f\n    requests: {arg: 1x, path: reqs, id: rid}", "py.yaml:6: stages.verify.requests.arg: \"1x\" is not an argument name"},
		{"module: a.b\n    qualname: C.f\n    requests: {arg: b, path: \"reqs[x]\", id: rid}", "py.yaml:6: stages.verify.requests.path: \"reqs[x]\" is not an object path"},
		{"binary: x\n    symbol: f\n    scope: batch\n    requests: {arg: b, path: r, id: i}", "py.yaml:7: stages.verify.requests: only Python stages have requests"},
	} {
		_, err := Parse("py.yaml", []byte("engine: e\nstages:\n  verify:\n    "+c.stage+"\n"))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got  %v\n want %s", c.stage, err, c.want)
		}
	}
}

func TestParsePythonAccept(t *testing.T) {
	s, err := Parse("py.yaml", []byte(`engine: sglang
stages:
  verify:
    module: m
    qualname: W.verify
  accept:
    module: m.p
    qualname: P._resolve
    read_from: P.process_decode
    requests: {arg: batch, path: "reqs[*]", id: rid}
    accepted: {arg: result, path: "counts[*]"}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := s.Stages[Accept]
	if a.ReadFrom != "P.process_decode" || a.Accepted == nil || a.Accepted.Arg != "result" || a.Accepted.Path != "counts[*]" || a.Requests.Arg != "batch" {
		t.Errorf("accept: %+v %+v", a, a.Accepted)
	}
	_, err = Parse("py.yaml", []byte("engine: e\nstages:\n  verify:\n    module: m\n    qualname: W.v\n  accept:\n    module: m\n    qualname: P.r\n"))
	if err == nil || !strings.Contains(err.Error(), "py.yaml:7: stages.accept: a Python accept stage needs requests and accepted") {
		t.Errorf("accept without reads: %v", err)
	}
	// Read from its own frame: counts as lengths, less the bonus token,
	// for the requests that had drafts.
	ownFrame := func(reads string) *Spec {
		t.Helper()
		s, err := Parse("py.yaml", []byte("engine: e\nstages:\n  verify:\n    module: m\n    qualname: W.verify\n  accept:\n    module: m\n    qualname: S.update\n    requests: {arg: out, path: \"req_ids[*]\"}\n"+reads))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a = ownFrame("    accepted: {arg: out, path: \"sampled[*]\", len: true, add: -1}\n    drafted: {arg: sched, path: \"spec_tokens\"}\n").Stages[Accept]
	if a.ReadFrom != "" || !a.Accepted.Len || a.Accepted.Add != -1 || a.Drafted == nil || a.Drafted.Arg != "sched" {
		t.Errorf("accept: %+v %+v %+v", a, a.Accepted, a.Drafted)
	}
	// vLLM's count: the length less the run's tokens sampled per step.
	a = ownFrame("    accepted: {arg: out, path: \"sampled[*]\", len: true, sub: {arg: self, path: num_sampled_tokens_per_step}}\n").Stages[Accept]
	if sub := a.Accepted.Sub; sub == nil || sub.Arg != "self" || sub.Path != "num_sampled_tokens_per_step" || sub.Line != 10 {
		t.Errorf("sub: %+v", sub)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"accepted: {arg: out, path: \"s[*]\", len: maybe}", "stages.accept.accepted.len: want true or false"},
		{"accepted: {arg: out, path: \"s[*]\", add: x}", "stages.accept.accepted.add: want an integer"},
		{"accepted: {arg: out, path: \"s[*]\"}\n    drafted: {arg: s, path: p, len: true}", `stages.accept.drafted: unknown key "len"`},
		{"accepted: {arg: out, path: \"s[*]\", sub: {arg: self, path: \"n[*]\"}}", "stages.accept.accepted.sub: one number to take from each count, not a list"},
		{"accepted: {arg: out, path: \"s[*]\", sub: {arg: self, path: n, add: 1}}", `stages.accept.accepted.sub: unknown key "add"`},
		{"accepted: {arg: out, path: \"s[*]\", sub: {path: n}}", "stages.accept.accepted.sub: missing arg"},
	} {
		_, err := Parse("py.yaml", []byte("engine: e\nstages:\n  verify:\n    module: m\n    qualname: W.v\n  accept:\n    module: m\n    qualname: S.u\n    requests: {arg: o, path: \"r[*]\"}\n    "+bad.yaml+"\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.yaml, err, bad.want)
		}
	}
}

func TestParseVariantFields(t *testing.T) {
	s, err := Parse("v.yaml", []byte(`engine: sglang-ngram
worker: NGRAMWorker
same_batch: true
match:
  module: [sglang.srt.speculative.ngram_worker]
  priority: 1
stages:
  verify:
    module: sglang.srt.speculative.ngram_worker
    qualname: NGRAMWorker.forward_batch_generation
    requests: {arg: model_worker_batch, path: "reqs[*]", id: rid}
    when: {arg: model_worker_batch, path: forward_mode, equals: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Worker != "NGRAMWorker" || !s.SameBatch || s.Match.Priority != 1 {
		t.Errorf("spec: worker %q same_batch %v priority %d", s.Worker, s.SameBatch, s.Match.Priority)
	}
	if w := s.Stages[Verify].When; w == nil || w.Arg != "model_worker_batch" || w.Path != "forward_mode" || !slices.Equal(w.Equals, []string{"2"}) || w.Line != 12 {
		t.Errorf("when: %+v", w)
	}
	for _, c := range []struct{ src, want string }{
		{"same_batch: maybe", "v.yaml:2: same_batch: want true or false"},
		{"match: {priority: high}", "v.yaml:2: match.priority"},
	} {
		_, err := Parse("v.yaml", []byte("engine: x\n"+c.src+"\nstages:\n  verify: {module: a, qualname: f}\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.src, err, c.want)
		}
	}
	_, err = Parse("v.yaml", []byte("engine: x\nstages:\n  verify:\n    module: a\n    qualname: f\n    when: {arg: b, equals: 1}\n"))
	if err == nil || !strings.Contains(err.Error(), "give requests too") {
		t.Errorf("when without requests: %v", err)
	}
}

// equals takes one constant or a list of them (any of them keeps a call);
// an empty, repeated or over-long list is refused at its line.
func TestParseWhenEquals(t *testing.T) {
	many := "[" + strings.Repeat("1, ", 16) + "2]"
	for _, c := range []struct {
		equals string
		want   []string
		err    string
	}{
		{"2", []string{"2"}, ""},
		{"[2, 5]", []string{"2", "5"}, ""},
		{"[decode, True]", []string{"decode", "True"}, ""},
		{"[]", nil, "v.yaml:6: stages.verify.when.equals: expected at least one string"},
		{"[2, 2]", nil, `v.yaml:6: stages.verify.when.equals: "2" given twice`},
		{"{a: 1}", nil, "v.yaml:6: stages.verify.when.equals: expected a string or a list of strings"},
		{many, nil, "v.yaml:6: stages.verify.when.equals: 17 values, at most 16"},
	} {
		src := "engine: x\nstages:\n  verify:\n    module: a\n    qualname: C.f\n" +
			"    when: {arg: b, path: mode, equals: " + c.equals + "}\n" +
			"    requests: {arg: b, path: \"reqs[*]\", id: rid}\n"
		s, err := Parse("v.yaml", []byte(src))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("equals %s: %v, want %q", c.equals, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("equals %s: %v", c.equals, err)
			continue
		}
		if got := s.Stages[Verify].When.Equals; !slices.Equal(got, c.want) {
			t.Errorf("equals %s: %q, want %q", c.equals, got, c.want)
		}
	}
	_, err := Parse("v.yaml", []byte("engine: x\nstages:\n  verify:\n    module: a\n    qualname: C.f\n    when: {arg: b, path: mode}\n    requests: {arg: b, path: \"reqs[*]\", id: rid}\n"))
	if err == nil || !strings.Contains(err.Error(), "v.yaml:6: stages.verify.when: missing equals") {
		t.Errorf("when without equals: %v", err)
	}
}

// arg may be one name, a list of names (the first the function has) or a
// position in the signature; every other form is refused where it is.
func TestParseArgChoice(t *testing.T) {
	for _, c := range []struct {
		arg  string
		name string
		want *ArgChoice
		err  string
	}{
		{arg: "batch", name: "batch"},
		{arg: "[batch, model_worker_batch]", want: &ArgChoice{Names: []string{"batch", "model_worker_batch"}}},
		{arg: "[batch]", want: &ArgChoice{Names: []string{"batch"}}},
		{arg: "1", want: &ArgChoice{Position: 1}},
		{arg: "0", want: &ArgChoice{Position: 0}},
		{arg: "-1", err: "py.yaml:6: stages.verify.requests.arg: -1 is not an argument position (0 to 255; 0 is self for a method)"},
		{arg: "256", err: "py.yaml:6: stages.verify.requests.arg: 256 is not an argument position"},
		{arg: "[]", err: "py.yaml:6: stages.verify.requests.arg: expected 1 to 8 argument names"},
		{arg: "[a, b, c, d, e, f, g, h, i]", err: "py.yaml:6: stages.verify.requests.arg: expected 1 to 8 argument names"},
		{arg: "[batch, batch]", err: `py.yaml:6: stages.verify.requests.arg: "batch" given twice`},
		{arg: "[batch, return]", err: "py.yaml:6: stages.verify.requests.arg: return is the return value, not an argument to choose"},
		{arg: "[batch, 2x]", err: `py.yaml:6: stages.verify.requests.arg: "2x" is not an argument name`},
		{arg: "[batch, [x]]", err: "py.yaml:6: stages.verify.requests.arg: expected a non-empty string"},
		{arg: "{a: b}", err: "py.yaml:6: stages.verify.requests.arg: expected a non-empty string"},
		{arg: "1.5", err: `py.yaml:6: stages.verify.requests.arg: "1.5" is not an argument name, a list of names or a position`},
	} {
		s, err := Parse("py.yaml", []byte("engine: e\nstages:\n  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: "+c.arg+", path: reqs, id: rid}\n"))
		if c.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("arg %s: %v\n want %s", c.arg, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("arg %s: %v", c.arg, err)
			continue
		}
		r := s.Stages[Verify].Requests
		if r.Arg != c.name || !reflect.DeepEqual(r.ArgChoice, c.want) {
			t.Errorf("arg %s: Arg %q choice %+v, want %q %+v", c.arg, r.Arg, r.ArgChoice, c.name, c.want)
		}
	}
	// when, accepted and drafted take the same forms.
	s, err := Parse("py.yaml", []byte(`engine: e
stages:
  verify:
    module: m
    qualname: W.verify
    requests: {arg: [batch, model_worker_batch], path: "reqs[*]", id: rid}
    when: {arg: [batch, model_worker_batch], path: forward_mode, equals: 2}
  accept:
    module: m
    qualname: S.update
    requests: {arg: 2, path: "req_ids[*]"}
    accepted: {arg: 2, path: "sampled[*]", len: true}
    drafted: {arg: [sched, scheduler_output], path: "spec_tokens"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Stages[Verify].When; w.ArgChoice == nil || len(w.ArgChoice.Names) != 2 || w.Arg != "" {
		t.Errorf("when: %+v", w)
	}
	a := s.Stages[Accept]
	if a.Accepted.ArgChoice == nil || a.Accepted.ArgChoice.Position != 2 || a.Drafted.ArgChoice.String() != "[sched, scheduler_output]" {
		t.Errorf("accept: %+v %+v", a.Accepted, a.Drafted)
	}
}

// TestCount: a count is the item (or its length) plus add, less sub where
// the spec reads one, and then never below 0, as vLLM computes it.
func TestCount(t *testing.T) {
	sub := &PyList{Arg: "self", Path: "n"}
	for _, c := range []struct {
		name   string
		l      PyList
		n, sub int64
		want   int64
	}{
		{"item", PyList{}, 3, 0, 3},
		{"add", PyList{Add: -1}, 3, 0, 2},
		{"add may go below 0 (no sub)", PyList{Add: -1}, 0, 0, -1},
		{"sub 1", PyList{Sub: sub}, 3, 1, 2},
		{"sub 2", PyList{Sub: sub}, 5, 2, 3},
		{"sub 0 (a diffusion model)", PyList{Sub: sub}, 4, 0, 4},
		{"sub clamps at 0", PyList{Sub: sub}, 1, 2, 0},
		{"add and sub", PyList{Add: 1, Sub: sub}, 3, 2, 2},
	} {
		if got := c.l.Count(c.n, c.sub); got != c.want {
			t.Errorf("%s: Count(%d, %d) = %d, want %d", c.name, c.n, c.sub, got, c.want)
		}
	}
}
