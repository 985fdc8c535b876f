package probes_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/probes"
)

// parse parses src as "t.yaml" and fails the test on an error.
func parse(t *testing.T, src string) *probes.Spec {
	t.Helper()
	s, err := probes.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\nspec:\n%s", err, src)
	}
	return s
}

// stripLines zeroes the Line fields so parsed specs compare with literals.
func stripLines(s *probes.Spec) {
	for _, st := range s.Stages {
		st.Line = 0
		if st.RequestID != nil {
			st.RequestID.Line = 0
		}
		for _, v := range st.Values {
			v.Line = 0
		}
	}
}

// rid is the usual request id: a string at the start of the struct in arg0.
func rid() *probes.Value {
	return &probes.Value{At: probes.Entry, From: 0, Type: probes.TypeString, Size: 8, ElemSize: 4}
}

// minimal is the smallest spec that parses; stages are appended to it.
const minimal = `engine: e
stages:
  verify:
    binary: b
    symbol: v
    scope: batch
`

func TestParseFullSpec(t *testing.T) {
	src := `engine: full
description: every field
match:
  exe: [eng, eng2]
  cmdline: ["--speculative"]
  library: [libeng.so]
stages:
  draft:
    binary: [libeng.so, /opt/eng/libeng.so]
    symbol: _Z5draftPv
    scope: request
    request_id: {at: entry, from: arg1, deref: [8, 0x10, -8], type: string}
    values:
      num_drafts: {at: exit, from: ret, type: vector_len, elem_size: 8, add: -1}
  verify:
    binary: libeng.so
    symbol: "ns::Eng::verify"
    scope: batch
    values:
      batch: {at: entry, from: arg5, type: int, size: 2}
  accept:
    binary: [libeng.so]
    symbol: accept
    request_id: {at: exit, from: arg0, type: int, size: 4}
    values:
      num_correct_drafts: {at: entry, from: arg2, size: 1, add: 3}
      tokens.total: {at: exit, from: ret, deref: [0]}
  draft_extend:
    binary: libeng.so
    symbol: extend
    scope: batch
`
	got := parse(t, src)
	if got.Stages["draft"].Line != 9 || got.Stages["draft"].RequestID.Line != 12 || got.Stages["accept"].Values["tokens.total"].Line != 27 {
		t.Errorf("lines: draft %d, draft.request_id %d, accept.values.tokens.total %d; want 9, 12, 27",
			got.Stages["draft"].Line, got.Stages["draft"].RequestID.Line, got.Stages["accept"].Values["tokens.total"].Line)
	}
	stripLines(got)
	want := &probes.Spec{
		Engine:      "full",
		Description: "every field",
		Match:       probes.Match{Exe: []string{"eng", "eng2"}, Cmdline: []string{"--speculative"}, Library: []string{"libeng.so"}},
		File:        "t.yaml",
		Stages: map[string]*probes.Stage{
			"draft": {
				Name: "draft", Binary: []string{"libeng.so", "/opt/eng/libeng.so"}, Symbol: "_Z5draftPv", Scope: probes.ScopeRequest,
				RequestID: &probes.Value{At: probes.Entry, From: 1, Deref: []int64{8, 16, -8}, Type: probes.TypeString, Size: 8, ElemSize: 4},
				Values: map[string]*probes.Value{
					"num_drafts": {At: probes.Exit, From: probes.SourceRet, Type: probes.TypeVectorLen, Size: 8, ElemSize: 8, Add: -1},
				},
			},
			"verify": {
				Name: "verify", Binary: []string{"libeng.so"}, Symbol: "ns::Eng::verify", Scope: probes.ScopeBatch,
				Values: map[string]*probes.Value{
					"batch": {At: probes.Entry, From: 5, Type: probes.TypeInt, Size: 2, ElemSize: 4},
				},
			},
			"accept": {
				Name: "accept", Binary: []string{"libeng.so"}, Symbol: "accept", Scope: probes.ScopeRequest,
				RequestID: &probes.Value{At: probes.Exit, From: 0, Type: probes.TypeInt, Size: 4, ElemSize: 4},
				Values: map[string]*probes.Value{
					"num_correct_drafts": {At: probes.Entry, From: 2, Type: probes.TypeInt, Size: 1, ElemSize: 4, Add: 3},
					"tokens.total":       {At: probes.Exit, From: probes.SourceRet, Deref: []int64{0}, Type: probes.TypeInt, Size: 8, ElemSize: 4},
				},
			},
			"draft_extend": {
				Name: "draft_extend", Binary: []string{"libeng.so"}, Symbol: "extend", Scope: probes.ScopeBatch,
				Values: map[string]*probes.Value{},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		for name := range want.Stages {
			if !reflect.DeepEqual(got.Stages[name], want.Stages[name]) {
				t.Errorf("stage %s:\n got %+v\nwant %+v", name, got.Stages[name], want.Stages[name])
			}
		}
		got.Stages, want.Stages = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("spec:\n got %+v\nwant %+v", got, want)
		}
	}
}

func TestParseGoodSpecs(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, s *probes.Spec)
	}{
		{"minimal", minimal, func(t *testing.T, s *probes.Spec) {
			if s.Engine != "e" || s.Description != "" || len(s.Stages) != 1 || s.File != "t.yaml" {
				t.Errorf("got %+v", s)
			}
			if !reflect.DeepEqual(s.Match, probes.Match{}) {
				t.Errorf("match = %+v, want empty", s.Match)
			}
			v := s.Stages["verify"]
			if v.Name != "verify" || v.Symbol != "v" || v.Scope != probes.ScopeBatch || v.RequestID != nil || len(v.Values) != 0 {
				t.Errorf("verify = %+v", v)
			}
		}},
		{"native request boundary", minimal + "request_boundary:\n  binary: [b, libb.so]\n  symbol: run_request\n", func(t *testing.T, s *probes.Spec) {
			b := s.Stages[probes.RequestBoundary]
			if b == nil || b.IsPython() || b.Symbol != "run_request" || !reflect.DeepEqual(b.Binary, []string{"b", "libb.so"}) || b.Scope != probes.ScopeBatch || b.Line != 8 {
				t.Fatalf("boundary = %+v", b)
			}
			if b.BoundaryName() != "run_request" || s.Stages["verify"].BoundaryName() != "" || s.NamesRequests() {
				t.Errorf("BoundaryName %q, verify's %q, NamesRequests %v", b.BoundaryName(), s.Stages["verify"].BoundaryName(), s.NamesRequests())
			}
		}},
		{"python request boundary", "engine: e\nstages:\n  verify: {module: m, qualname: M.forward}\nrequest_boundary: {module: gen.utils, qualname: GenerationMixin.generate}\n", func(t *testing.T, s *probes.Spec) {
			b := s.Stages[probes.RequestBoundary]
			if b == nil || !b.IsPython() || b.Module != "gen.utils" || b.BoundaryName() != "GenerationMixin.generate" || b.Requests != nil {
				t.Fatalf("boundary = %+v", b)
			}
		}},
		{"binary as a single string", minimal, func(t *testing.T, s *probes.Spec) {
			if got := s.Stages["verify"].Binary; !reflect.DeepEqual(got, []string{"b"}) {
				t.Errorf("binary = %q, want [b]", got)
			}
		}},
		{"binary as a list keeps order", strings.Replace(minimal, "binary: b", "binary: [z, a, /x/y.so]", 1), func(t *testing.T, s *probes.Spec) {
			if got := s.Stages["verify"].Binary; !reflect.DeepEqual(got, []string{"z", "a", "/x/y.so"}) {
				t.Errorf("binary = %q", got)
			}
		}},
		{"binary as a block list", strings.Replace(minimal, "binary: b", "binary:\n      - one\n      - two", 1), func(t *testing.T, s *probes.Spec) {
			if got := s.Stages["verify"].Binary; !reflect.DeepEqual(got, []string{"one", "two"}) {
				t.Errorf("binary = %q", got)
			}
		}},
		{"scope defaults to request", minimal + `  draft:
    binary: b
    symbol: d
    request_id: {at: entry, from: arg0, type: string}
`, func(t *testing.T, s *probes.Spec) {
			if got := s.Stages["draft"].Scope; got != probes.ScopeRequest {
				t.Errorf("scope = %q, want request", got)
			}
		}},
		{"match entries as single strings", "match:\n  exe: a\n  cmdline: b c\n  library: libc.so\n" + minimal, func(t *testing.T, s *probes.Spec) {
			want := probes.Match{Exe: []string{"a"}, Cmdline: []string{"b c"}, Library: []string{"libc.so"}}
			if !reflect.DeepEqual(s.Match, want) {
				t.Errorf("match = %+v, want %+v", s.Match, want)
			}
		}},
		{"value defaults", minimal + "    values:\n      x: {at: entry, from: arg3}\n", func(t *testing.T, s *probes.Spec) {
			want := &probes.Value{At: probes.Entry, From: 3, Type: probes.TypeInt, Size: 8, ElemSize: 4, Line: 8}
			if got := s.Stages["verify"].Values["x"]; !reflect.DeepEqual(got, want) {
				t.Errorf("value = %+v, want %+v", got, want)
			}
		}},
		{"every size", minimal + `    values:
      a: {at: entry, from: arg0, size: 1}
      b: {at: entry, from: arg1, size: 2}
      c: {at: entry, from: arg2, size: 4}
      d: {at: exit, from: ret, size: 8}
`, func(t *testing.T, s *probes.Spec) {
			for name, size := range map[string]int{"a": 1, "b": 2, "c": 4, "d": 8} {
				if got := s.Stages["verify"].Values[name].Size; got != size {
					t.Errorf("%s.size = %d, want %d", name, got, size)
				}
			}
		}},
		{"every source", minimal + `    values:
      a: {at: entry, from: arg0}
      b: {at: entry, from: arg4}
      c: {at: exit, from: arg5}
      d: {at: exit, from: ret}
`, func(t *testing.T, s *probes.Spec) {
			for name, src := range map[string]probes.Source{"a": 0, "b": 4, "c": 5, "d": probes.SourceRet} {
				if got := s.Stages["verify"].Values[name].From; got != src {
					t.Errorf("%s.from = %v, want %v", name, got, src)
				}
			}
		}},
		{"four values plus request id on different boundaries", minimal + `  accept:
    binary: b
    symbol: a
    request_id: {at: exit, from: arg0, type: string}
    values:
      a: {at: entry, from: arg0}
      b: {at: entry, from: arg1, type: string}
      c: {at: entry, from: arg2}
      d: {at: entry, from: arg3}
`, func(t *testing.T, s *probes.Spec) {
			b := s.Stages["accept"].Boundaries()
			if len(b[probes.Entry]) != 4 || len(b[probes.Exit]) != 1 {
				t.Errorf("boundaries: %d at entry, %d at exit; want 4, 1", len(b[probes.Entry]), len(b[probes.Exit]))
			}
		}},
		{"deref of three", minimal + "    values:\n      x: {at: entry, from: arg0, deref: [0, 8, 16]}\n", func(t *testing.T, s *probes.Spec) {
			if got := s.Stages["verify"].Values["x"].Deref; !reflect.DeepEqual(got, []int64{0, 8, 16}) {
				t.Errorf("deref = %v", got)
			}
		}},
		{"empty deref", minimal + "    values:\n      x: {at: entry, from: arg0, deref: []}\n", func(t *testing.T, s *probes.Spec) {
			if got := s.Stages["verify"].Values["x"].Deref; len(got) != 0 {
				t.Errorf("deref = %v, want none", got)
			}
		}},
		{"comments and folded description", "# a comment\nengine: e # trailing\ndescription: >-\n  two\n  lines\n" + strings.TrimPrefix(minimal, "engine: e\n"), func(t *testing.T, s *probes.Spec) {
			if s.Description != "two lines" {
				t.Errorf("description = %q", s.Description)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, parse(t, tc.src)) })
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int      // 0: no line in the message
		want []string // substrings of the message
	}{
		{"empty file", "", 0, []string{"empty spec", "expected a mapping"}},
		{"only a comment", "# nothing\n", 0, []string{"empty spec"}},
		{"not a mapping", "- a\n- b\n", 1, []string{"spec: expected a mapping with keys engine, description, worker, same_batch, match, stages"}},
		// The line of the mistake, not yaml.v3's (0-based, of the enclosing
		// construct, for parser errors): TestParseYAMLErrorLine has more.
		{"invalid YAML: unclosed list", "engine: e\nmatch:\n  exe: [a\n", 3, []string{"invalid YAML: did not find expected ',' or ']'"}},
		{"invalid YAML: bad indentation", "engine: e\nstages:\n  verify:\n    binary: b\n   symbol: v\n", 5, []string{"invalid YAML: did not find expected key"}},
		{"invalid YAML: scanner error", "engine: e\nstages:\n  verify: a\n   b: c\n", 4, []string{"invalid YAML: mapping values are not allowed in this context"}},
		{"invalid YAML: tab", "engine: e\n\tstages: {}\n", 2, []string{"invalid YAML: found a tab character"}},
		{"invalid YAML: control character", "\x01", 1, []string{"invalid YAML: control characters are not allowed"}},

		{"unknown top-level key", "engin: e\n" + strings.TrimPrefix(minimal, "engine: e\n"), 1,
			[]string{`spec: unknown key "engin" (expected one of engine, description, worker, same_batch, match, stages, fields, thread_label, root, request_boundary)`}},
		{"request boundary with a spec naming requests", "engine: e\nstages:\n  verify:\n    binary: b\n    symbol: v\n    request_id: {at: entry, from: arg0, type: string}\nrequest_boundary:\n  binary: b\n  symbol: run\n", 8,
			[]string{"request_boundary: the stages name their requests"}},
		{"python request boundary with requests", "engine: e\nstages:\n  verify:\n    module: m\n    qualname: C.v\n    requests: {arg: batch}\nrequest_boundary: {module: m, qualname: C.generate}\n", 7,
			[]string{"request_boundary: the stages name their requests"}},
		{"request boundary reads values", minimal + "request_boundary:\n  binary: b\n  symbol: run\n  values:\n    x: {at: entry, from: arg0}\n", 10,
			[]string{`request_boundary: unknown key "values" (expected one of binary, symbol, module, qualname, process)`}},
		{"request boundary without symbol", minimal + "request_boundary:\n  binary: b\n", 8,
			[]string{"request_boundary: missing symbol"}},
		{"request boundary with a bad qualname", minimal + "request_boundary:\n  module: m\n  qualname: 'generate()'\n", 9,
			[]string{`request_boundary.qualname: "generate()" is not a qualified name`}},
		{"unknown match key", "match:\n  exe: a\n  libs: [x]\n" + minimal, 3,
			[]string{`match: unknown key "libs" (expected one of exe, cmdline, library, module, priority, ranks)`}},
		{"unknown stage", minimal + "  prefill:\n    binary: b\n    symbol: p\n", 7,
			[]string{`stages: unknown key "prefill" (expected one of draft, verify, accept, draft_extend)`}},
		{"unknown stage key", minimal + "    sym: x\n", 7,
			[]string{`stages.verify: unknown key "sym" (expected one of binary, symbol, scope, request_id, values, module, qualname, requests, when, read_from, accepted, drafted, process)`}},
		{"unknown value key", minimal + "    values:\n      x: {at: entry, from: arg0, offset: 8}\n", 8,
			[]string{`stages.verify.values.x: unknown key "offset" (expected one of at, from, deref, type, size, elem_size, add, check)`}},
		{"unknown request_id key", minimal + "  draft:\n    binary: b\n    symbol: d\n    request_id: {at: entry, form: arg0}\n", 10,
			[]string{`stages.draft.request_id: unknown key "form"`}},
		{"key given twice", "engine: a\nengine: b\nstages: {verify: {binary: b, symbol: v, scope: batch}}\n", 2,
			[]string{`spec: key "engine" given twice`}},

		{"missing engine", strings.TrimPrefix(minimal, "engine: e\n"), 1, []string{"spec: missing engine"}},
		{"missing stages", "engine: e\n", 1, []string{"spec: missing stages"}},
		{"missing verify", "engine: e\nstages:\n  draft:\n    binary: b\n    symbol: d\n    scope: batch\n", 3,
			[]string{"stages: missing verify"}},
		{"stages not a mapping", "engine: e\nstages: [verify]\n", 2, []string{"stages: expected a mapping"}},
		{"missing binary", "engine: e\nstages:\n  verify:\n    symbol: v\n    scope: batch\n", 4,
			[]string{"stages.verify: missing binary"}},
		{"missing symbol", "engine: e\nstages:\n  verify:\n    binary: b\n    scope: batch\n", 4,
			[]string{"stages.verify: missing symbol"}},
		{"null symbol", "engine: e\nstages:\n  verify:\n    binary: b\n    symbol:\n    scope: batch\n", 5,
			[]string{"stages.verify.symbol: expected a non-empty string"}},
		{"engine is a list", "engine: [a]\n" + strings.TrimPrefix(minimal, "engine: e\n"), 1, []string{"engine: expected a non-empty string"}},
		{"binary is a mapping", strings.Replace(minimal, "binary: b", "binary: {a: b}", 1), 4,
			[]string{"stages.verify.binary: expected a string or a list of strings"}},

		{"bad scope", strings.Replace(minimal, "scope: batch", "scope: global", 1), 6,
			[]string{`stages.verify.scope: expected request or batch, got "global"`}},
		{"request scope without request_id", strings.Replace(minimal, "scope: batch", "scope: request", 1), 4,
			[]string{"stages.verify: scope request needs request_id"}},
		{"default scope without request_id", "engine: e\nstages:\n  verify:\n    binary: b\n    symbol: v\n", 4,
			[]string{"stages.verify: scope request needs request_id"}},
		{"batch with request_id", minimal + "    request_id: {at: entry, from: arg0, type: string}\n", 7,
			[]string{"stages.verify: a batch stage has no single request_id"}},
		{"accept with batch scope", minimal + "  accept:\n    binary: b\n    symbol: a\n    scope: batch\n", 8,
			[]string{"stages.accept: the accept stage must have scope request"}},

		{"ret at entry", minimal + "    values:\n      x: {at: entry, from: ret}\n", 8,
			[]string{"stages.verify.values.x: the return value can only be read at exit"}},
		{"from arg6", minimal + "    values:\n      x: {at: entry, from: arg6}\n", 8,
			[]string{`stages.verify.values.x.from: expected arg0..arg5 or ret, got "arg6"`}},
		{"from foo", minimal + "    values:\n      x:\n        at: entry\n        from: foo\n", 10,
			[]string{`stages.verify.values.x.from: expected arg0..arg5 or ret, got "foo"`}},
		{"missing at", minimal + "    values:\n      x: {from: arg0}\n", 8, []string{"stages.verify.values.x: missing at (entry or exit)"}},
		{"bad at", minimal + "    values:\n      x: {at: return, from: arg0}\n", 8, []string{`stages.verify.values.x.at: expected entry or exit, got "return"`}},
		{"missing from", minimal + "    values:\n      x: {at: exit}\n", 8, []string{"stages.verify.values.x: missing from (arg0..arg5 or ret)"}},
		{"deref too long", minimal + "    values:\n      x: {at: entry, from: arg0, deref: [0, 8, 16, 24]}\n", 8,
			[]string{"stages.verify.values.x.deref: expected a list of at most 3 byte offsets"}},
		{"deref not a list", minimal + "    values:\n      x: {at: entry, from: arg0, deref: 8}\n", 8,
			[]string{"stages.verify.values.x.deref: expected a list of at most 3 byte offsets"}},
		{"deref neither an integer nor a field", minimal + "    values:\n      x: {at: entry, from: arg0, deref: [eight]}\n", 8,
			[]string{`stages.verify.values.x.deref: "eight": "eight" is neither an integer nor a field (struct.member)`}},
		{"bad type", minimal + "    values:\n      x: {at: entry, from: arg0, type: float}\n", 8,
			[]string{`stages.verify.values.x.type: expected int, string or vector_len, got "float"`}},
		{"size 3", minimal + "    values:\n      x: {at: entry, from: arg0, size: 3}\n", 8,
			[]string{"stages.verify.values.x.size: expected 1, 2, 4 or 8 bytes, got 3"}},
		{"size not a number", minimal + "    values:\n      x: {at: entry, from: arg0, size: four}\n", 8,
			[]string{`stages.verify.values.x.size: expected an integer, got "four"`}},
		{"size on a string", minimal + "    values:\n      x: {at: entry, from: arg0, type: string, size: 4}\n", 8,
			[]string{"stages.verify.values.x.size: only an int has a size"}},
		{"elem_size on an int", minimal + "    values:\n      x: {at: entry, from: arg0, type: int, elem_size: 4}\n", 8,
			[]string{"stages.verify.values.x.elem_size: only a vector_len has an elem_size"}},
		{"elem_size zero", minimal + "    values:\n      x: {at: entry, from: arg0, type: vector_len, elem_size: 0}\n", 8,
			[]string{"stages.verify.values.x.elem_size: expected a positive byte count, got 0"}},
		{"add not an integer", minimal + "    values:\n      x: {at: entry, from: arg0, add: 1.5}\n", 8,
			[]string{`stages.verify.values.x.add: expected an integer, got "1.5"`}},
		{"value not a mapping", minimal + "    values:\n      x: arg0\n", 8,
			[]string{"stages.verify.values.x: expected a mapping with keys at, from"}},
		{"values not a mapping", minimal + "    values: [a, b]\n", 7,
			[]string{"stages.verify.values: expected a mapping of attribute name to value"}},

		{"five values at one boundary", minimal + `    values:
      a: {at: entry, from: arg0}
      b: {at: entry, from: arg1}
      c: {at: entry, from: arg2}
      d: {at: entry, from: arg3}
      e: {at: entry, from: arg4}
`, 4, []string{"stages.verify: 5 values read at entry, at most 4"}},
		{"request id counts toward the limit", minimal + `  accept:
    binary: b
    symbol: a
    request_id: {at: exit, from: arg0, type: string}
    values:
      a: {at: exit, from: arg1}
      b: {at: exit, from: arg2}
      c: {at: exit, from: arg3}
      d: {at: exit, from: ret}
`, 8, []string{"stages.accept: 5 values read at exit, at most 4"}},
		{"two strings at one boundary", minimal + `  draft:
    binary: b
    symbol: d
    request_id: {at: entry, from: arg0, type: string}
    values:
      name: {at: entry, from: arg1, type: string}
`, 8, []string{"stages.draft: 2 string values read at entry, at most 1"}},
		{"bad attribute name", minimal + "    values:\n      num-drafts: {at: exit, from: ret}\n", 8,
			[]string{`stages.verify.values: "num-drafts" is not a valid attribute name`}},
		{"attribute name starting with a digit", minimal + "    values:\n      1st: {at: exit, from: ret}\n", 8,
			[]string{`"1st" is not a valid attribute name`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := probes.Parse("bad.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want an error\nspec:\n%s", s, tc.src)
			}
			if s != nil {
				t.Errorf("Parse returned a spec with its error")
			}
			var pe *probes.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *probes.Error", err, err)
			}
			prefix := "bad.yaml: "
			if tc.line > 0 {
				prefix = fmt.Sprintf("bad.yaml:%d: ", tc.line)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, prefix) {
				t.Errorf("error %q does not start with %q", msg, prefix)
			}
			if pe.File != "bad.yaml" || pe.Line != tc.line {
				t.Errorf("error at %s:%d, want bad.yaml:%d", pe.File, pe.Line, tc.line)
			}
			for _, w := range tc.want {
				if !strings.Contains(pe.Msg, w) {
					t.Errorf("message %q does not say %q", pe.Msg, w)
				}
			}
		})
	}
}

func TestValueConvert(t *testing.T) {
	tests := []struct {
		name string
		v    probes.Value
		raw  uint64
		want int64
	}{
		{"size 8 positive", probes.Value{Size: 8}, 42, 42},
		{"size 8 negative", probes.Value{Size: 8}, 0xffff_ffff_ffff_fffe, -2},
		{"size 4 positive", probes.Value{Size: 4}, 0x7fff_ffff, 0x7fff_ffff},
		{"size 4 sign-extends", probes.Value{Size: 4}, 0xffff_ffff, -1},
		{"size 4 ignores upper garbage", probes.Value{Size: 4}, 0xdead_beef_0000_0005, 5},
		{"size 4 upper garbage, negative", probes.Value{Size: 4}, 0x1234_5678_8000_0000, -0x8000_0000},
		{"size 2 sign-extends", probes.Value{Size: 2}, 0xffff, -1},
		{"size 2 ignores upper bits", probes.Value{Size: 2}, 0xabcd_0000_0001_7fff, 0x7fff},
		{"size 2 min", probes.Value{Size: 2}, 0x8000, -0x8000},
		{"size 1 sign-extends", probes.Value{Size: 1}, 0xff, -1},
		{"size 1 ignores upper bits", probes.Value{Size: 1}, 0x1234_5601, 1},
		{"size 1 min", probes.Value{Size: 1}, 0x80, -128},
		{"add", probes.Value{Size: 8, Add: -1}, 10, 9},
		{"add after sign extension", probes.Value{Size: 4, Add: 3}, 0xffff_fffe, 1},
		{"add to size 1", probes.Value{Size: 1, Add: 100}, 0xff, 99},
		{"string type keeps all 64 bits", probes.Value{Type: probes.TypeString, Size: 4}, 0xffff_ffff, 0xffff_ffff},
		{"vector_len keeps all 64 bits", probes.Value{Type: probes.TypeVectorLen, Size: 1, Add: -1}, 0x100, 0xff},
	}
	for _, tc := range tests {
		if got := tc.v.Convert(tc.raw); got != tc.want {
			t.Errorf("%s: Convert(%#x) = %d, want %d", tc.name, tc.raw, got, tc.want)
		}
	}
}

func TestConvertParsedValue(t *testing.T) {
	s := parse(t, minimal+"    values:\n      n: {at: exit, from: ret, type: int, size: 4, add: -1}\n")
	if got := s.Stages["verify"].Values["n"].Convert(0xffff_ffff_0000_0000); got != -1 {
		t.Errorf("Convert = %d, want -1 (0 read as int32, plus add -1)", got)
	}
}

func TestStageBoundaries(t *testing.T) {
	s := parse(t, minimal+`  accept:
    binary: b
    symbol: a
    request_id: {at: entry, from: arg0, type: string}
    values:
      zeta: {at: entry, from: arg3}
      alpha: {at: entry, from: arg1}
      mid: {at: exit, from: ret}
      beta: {at: exit, from: arg2}
      Upper: {at: entry, from: arg2}
`)
	b := s.Stages["accept"].Boundaries()
	names := func(ns []probes.Named) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	if got, want := names(b[probes.Entry]), []string{"", "Upper", "alpha", "zeta"}; !reflect.DeepEqual(got, want) {
		t.Errorf("entry = %q, want %q", got, want)
	}
	if got, want := names(b[probes.Exit]), []string{"beta", "mid"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exit = %q, want %q", got, want)
	}
	acc := s.Stages["accept"]
	if b[probes.Entry][0].Value != acc.RequestID || b[probes.Entry][2].Value != acc.Values["alpha"] {
		t.Errorf("Boundaries does not point at the stage's values")
	}

	// A request id read at exit comes first there.
	s = parse(t, minimal+`  accept:
    binary: b
    symbol: a
    request_id: {at: exit, from: arg0, type: string}
    values:
      a: {at: exit, from: ret}
`)
	b = s.Stages["accept"].Boundaries()
	if got, want := names(b[probes.Exit]), []string{"", "a"}; !reflect.DeepEqual(got, want) || len(b[probes.Entry]) != 0 {
		t.Errorf("exit = %q, entry = %d values; want %q and none", got, len(b[probes.Entry]), want)
	}

	// Stable across calls (map iteration order must not leak).
	first := names(s.Stages["accept"].Boundaries()[probes.Exit])
	for i := 0; i < 20; i++ {
		if got := names(s.Stages["accept"].Boundaries()[probes.Exit]); !reflect.DeepEqual(got, first) {
			t.Fatalf("order changed: %q then %q", first, got)
		}
	}
}

func TestBoundaryAndSourceStrings(t *testing.T) {
	if probes.Entry.String() != "entry" || probes.Exit.String() != "exit" {
		t.Errorf("Boundary strings: %q %q", probes.Entry, probes.Exit)
	}
	if probes.Source(0).String() != "arg0" || probes.Source(5).String() != "arg5" || probes.SourceRet.String() != "ret" {
		t.Errorf("Source strings: %q %q %q", probes.Source(0), probes.Source(5), probes.SourceRet)
	}
}

func TestCatalogParses(t *testing.T) {
	specs, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) == 0 {
		t.Fatal("empty catalog")
	}
	seen := map[string]bool{}
	for i, s := range specs {
		if i > 0 && specs[i-1].Engine > s.Engine {
			t.Errorf("catalog not sorted: %q before %q", specs[i-1].Engine, s.Engine)
		}
		if seen[s.Engine] {
			t.Errorf("engine %q twice in the catalog", s.Engine)
		}
		seen[s.Engine] = true
		if !strings.HasPrefix(s.File, "catalog:") {
			t.Errorf("%s: File = %q, want catalog:NAME", s.Engine, s.File)
		}
		if s.Stages[probes.Verify] == nil {
			t.Errorf("%s: no verify stage", s.Engine)
		}
		src, err := probes.CatalogSource(s.Engine)
		if err != nil {
			t.Errorf("CatalogSource(%q): %v", s.Engine, err)
			continue
		}
		again, err := probes.Parse(s.File, src)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("%s: CatalogSource does not parse back to the same spec (err %v)", s.Engine, err)
		}
	}
	if !seen["demo"] {
		t.Errorf("catalog has no demo spec")
	}
}

func TestDemoSpec(t *testing.T) {
	s, err := probes.Lookup("demo")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Matches("specdemo", "", nil) || !s.Matches("specdemo-cet", "", nil) {
		t.Errorf("demo spec does not match the demo binaries")
	}
	acc := s.Stages[probes.Accept]
	if acc == nil || acc.Scope != probes.ScopeRequest || acc.RequestID == nil || acc.Values["num_correct_drafts"] == nil {
		t.Fatalf("demo accept stage = %+v", acc)
	}
	if n := acc.Values["num_correct_drafts"]; n.Size != 4 || n.From != 1 || n.At != probes.Entry {
		t.Errorf("num_correct_drafts = %+v", n)
	}
	for _, name := range []string{probes.Verify, probes.DraftExtend} {
		if s.Stages[name].Scope != probes.ScopeBatch {
			t.Errorf("demo %s scope = %q, want batch", name, s.Stages[name].Scope)
		}
	}
}

func TestLookupUnknownEngine(t *testing.T) {
	_, err := probes.Lookup("no-such-engine")
	if err == nil {
		t.Fatal("Lookup of an unknown engine succeeded")
	}
	specs, _ := probes.Catalog()
	msg := err.Error()
	if !strings.Contains(msg, `"no-such-engine"`) || !strings.Contains(msg, "--probes FILE") {
		t.Errorf("error %q should name the engine and --probes FILE", msg)
	}
	for _, s := range specs {
		if !strings.Contains(msg, s.Engine) {
			t.Errorf("error %q does not list engine %q", msg, s.Engine)
		}
	}
	if _, err := probes.CatalogSource("no-such-engine"); err == nil {
		t.Errorf("CatalogSource of an unknown engine succeeded")
	}
}

func TestMatches(t *testing.T) {
	s := &probes.Spec{Engine: "x", Match: probes.Match{
		Exe:     []string{"llama-server"},
		Cmdline: []string{"sglang.launch_server", ""},
		Library: []string{"libllama.so"},
	}}
	tests := []struct {
		name    string
		exe     string
		cmdline string
		mapped  []string
		want    bool
	}{
		{"exe", "llama-server", "", nil, true},
		{"exe is compared whole", "llama-server2", "", nil, false},
		{"exe prefix does not match", "llama", "", nil, false},
		{"cmdline substring", "python3", "python3 -m sglang.launch_server --model m", nil, true},
		{"cmdline absent", "python3", "python3 -m vllm.entrypoints", nil, false},
		{"empty cmdline entry matches nothing", "python3", "anything", nil, false},
		{"library basename", "python3", "", []string{"/usr/lib/libllama.so"}, true},
		{"versioned library", "python3", "", []string{"/opt/lib/libllama.so.1"}, true},
		{"versioned library, long", "python3", "", []string{"/opt/lib/libllama.so.1.2.3"}, true},
		{"library in a relative path", "python3", "", []string{"libllama.so"}, true},
		{"other library", "python3", "", []string{"/usr/lib/libllamafile.so", "/lib/libc.so.6"}, false},
		{"library name in a directory only", "python3", "", []string{"/opt/libllama.so/other.so"}, false},
		{"nothing", "", "", nil, false},
	}
	for _, tc := range tests {
		if got := s.Matches(tc.exe, tc.cmdline, tc.mapped); got != tc.want {
			t.Errorf("%s: Matches(%q, %q, %q) = %v, want %v", tc.name, tc.exe, tc.cmdline, tc.mapped, got, tc.want)
		}
	}
}

func TestDetect(t *testing.T) {
	a := &probes.Spec{Engine: "a", Match: probes.Match{Library: []string{"libfoo.so"}}}
	b := &probes.Spec{Engine: "b", Match: probes.Match{Exe: []string{"foo"}}}
	c := &probes.Spec{Engine: "c", Match: probes.Match{Cmdline: []string{"foo"}}}
	specs := []*probes.Spec{a, b, c}
	if got := detectNoErr(t, specs, probes.Process{Exe: "foo", Cmdline: "foo --x", Mapped: []string{"/lib/libfoo.so.1"}}); got != a {
		t.Errorf("Detect = %v, want the first matching spec (a)", got)
	}
	if got := detectNoErr(t, specs, probes.Process{Exe: "foo", Cmdline: "", Mapped: nil}); got != b {
		t.Errorf("Detect by exe = %v, want b", got)
	}
	if got := detectNoErr(t, specs, probes.Process{Exe: "bar", Cmdline: "bar foo", Mapped: nil}); got != c {
		t.Errorf("Detect by cmdline = %v, want c", got)
	}
	if got := detectNoErr(t, specs, probes.Process{Exe: "bar", Cmdline: "bar", Mapped: []string{"/lib/libbar.so"}}); got != nil {
		t.Errorf("Detect = %v, want nil", got)
	}
	if got := detectNoErr(t, nil, probes.Process{Exe: "foo", Cmdline: "foo", Mapped: nil}); got != nil {
		t.Errorf("Detect(nil) = %v, want nil", got)
	}
	cat, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if got := detectNoErr(t, cat, probes.Process{Exe: "specdemo", Cmdline: "./specdemo --threads 2", Mapped: nil}); got == nil || got.Engine != "demo" {
		t.Errorf("Detect(catalog, specdemo) = %v, want demo", got)
	}
}

// A YAML mistake is reported at its own line, whatever yaml.v3 says (its
// parser errors give the 0-based line of the construct the mistake broke).
func TestParseYAMLErrorLine(t *testing.T) {
	for _, c := range []struct {
		src  string
		line int
		msg  string
	}{
		{"engine: [a\n", 1, "did not find expected ',' or ']'"},
		{"engine: e\nmatch: {exe: [a}\n", 2, "did not find expected ',' or ']'"},
		{"engine: e\nstages:\n  verify: a\n   b: c\n", 4, "mapping values are not allowed in this context"},
		{"engine: e\nstages:\n  verify:\n    binary: 'b\n", 4, "found unexpected end of stream"},
		{"engine: e\nstages:\n  verify:\n    binary: b\n    symbol: s\n   scope: batch\n", 6, "did not find expected key"},
		{"engine: e\nmatch:\n  exe:\n    - a\n   - b\n", 5, "did not find expected key"},
		// A list that spans lines before the mistake: its unclosed first line
		// fails otherwise and is passed over.
		{"engine: e\nmatch:\n  exe: [a,\n    b]\n  cmdline: x: y\n", 5, "mapping values are not allowed in this context"},
		{"engine: e\nstages:\n  verify:\n\t  binary: b\n", 4, "found character that cannot start any token"},
		{"engine: e\nx: *nope\n", 2, "unknown anchor 'nope' referenced"},
	} {
		_, err := probes.Parse("y.yaml", []byte(c.src))
		var pe *probes.Error
		if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("Parse(%q) = %v, want y.yaml:%d: ... %s", c.src, err, c.line, c.msg)
		}
	}
}

// Known gaps, reported rather than fixed here; unskip once parse.go rejects them.
func TestParseRejectsDuplicateValueName(t *testing.T) {
	_, err := probes.Parse("d.yaml", []byte(minimal+"    values:\n      x: {at: entry, from: arg0}\n      x: {at: exit, from: ret}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "d.yaml:9: ") {
		t.Errorf("err = %v, want d.yaml:9: ... given twice", err)
	}
}

func TestParseRejectsEmptyBinaryAndSymbol(t *testing.T) {
	for _, src := range []string{
		strings.Replace(minimal, "binary: b", "binary: ''", 1),
		strings.Replace(minimal, "binary: b", "binary: []", 1),
		strings.Replace(minimal, "symbol: v", "symbol: ''", 1),
		strings.Replace(minimal, "engine: e", "engine: ''", 1),
	} {
		if _, err := probes.Parse("e.yaml", []byte(src)); err == nil {
			t.Errorf("Parse accepted\n%s", src)
		}
	}
}

func TestDetectByModule(t *testing.T) {
	py := &probes.Spec{Engine: "py", Match: probes.Match{Module: []string{"sglang.srt.managers.scheduler"}}}
	has := func(m string) bool { return m == "sglang.srt.managers.scheduler" }
	if got := detectNoErr(t, []*probes.Spec{py}, probes.Process{Exe: "python3", HasModule: has}); got != py {
		t.Errorf("by module: %v", got)
	}
	if got := detectNoErr(t, []*probes.Spec{py}, probes.Process{Exe: "python3"}); got != nil {
		t.Errorf("not Python: %v", got)
	}
}

// TestDetectRequireModule: the daemon's rule, in the same function attach
// uses. A Python spec that matches a launcher by its command line waits for
// the module; a spec without match.module waits for a stage's module; a
// native spec is not affected.
func TestDetectRequireModule(t *testing.T) {
	py := &probes.Spec{Engine: "py", Match: probes.Match{Cmdline: []string{"launch_server"}},
		Stages: map[string]*probes.Stage{"verify": {Module: "eng.worker", Qualname: "W.verify"}}}
	native := &probes.Spec{Engine: "native", Match: probes.Match{Exe: []string{"llama-server"}}}
	specs := []*probes.Spec{py, native}
	none := func(string) bool { return false }
	worker := func(m string) bool { return m == "eng.worker" }
	for _, tc := range []struct {
		name string
		p    probes.Process
		want *probes.Spec
	}{
		{"attach: command line", probes.Process{Exe: "python3", Cmdline: "python3 -m launch_server", HasModule: none}, py},
		{"daemon: command line only", probes.Process{Exe: "python3", Cmdline: "python3 -m launch_server", HasModule: none, RequireModule: true}, nil},
		{"daemon: stage module imported", probes.Process{Exe: "python3", HasModule: worker, RequireModule: true}, py},
		{"daemon: native", probes.Process{Exe: "llama-server", RequireModule: true}, native},
	} {
		if got := detectNoErr(t, specs, tc.p); got != tc.want {
			t.Errorf("%s: Detect = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDetectServer(t *testing.T) {
	mod := func(names ...string) func(string) bool {
		return func(m string) bool { return slices.Contains(names, m) }
	}
	placed := &probes.Spec{Engine: "vllm-mtp", Match: probes.Match{Module: []string{"vllm.mtp"}, Priority: 2},
		Stages: map[string]*probes.Stage{"verify": {Module: "vllm.runner", Qualname: "R.execute_model", Process: []string{"Worker", "EngineCore"}}}}
	plain := &probes.Spec{Engine: "vllm-core", Match: probes.Match{Module: []string{"vllm.core"}, Priority: 1},
		Stages: map[string]*probes.Stage{"verify": {Module: "vllm.core", Qualname: "C.step"}}}
	unplaced := &probes.Spec{Engine: "sglang", Match: probes.Match{Module: []string{"sglang.scheduler"}, Priority: 3},
		Stages: map[string]*probes.Stage{"verify": {Module: "sglang.worker", Qualname: "W.verify"}}}
	specs := []*probes.Spec{placed, plain, unplaced}
	core := probes.Process{Exe: "python3", HasModule: mod("vllm.core")}
	worker := probes.Process{Exe: "python3", HasModule: mod("vllm.mtp", "vllm.runner")}
	scheduler := probes.Process{Exe: "python3", HasModule: mod("sglang.scheduler")}
	launcher := probes.Process{Exe: "python3", HasModule: mod()}
	for _, tc := range []struct {
		name     string
		attached probes.Process
		others   []probes.Process
		want     *probes.Spec
	}{
		{"EngineCore, its worker's speculator outranks", core, []probes.Process{worker}, placed},
		{"the worker itself", worker, []probes.Process{core}, placed},
		{"alone", core, nil, plain},
		// A launcher runs no stage, and a spec that does not place its
		// stages would run them in the launcher: not taken from a child.
		{"a launcher", launcher, []probes.Process{scheduler}, nil},
	} {
		if got, err := probes.DetectServer(specs, tc.attached, tc.others); got != tc.want || err != nil {
			t.Errorf("%s: DetectServer = %v, %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

// detectNoErr is probes.Detect for processes whose ranks are not in question.
func detectNoErr(t *testing.T, specs []*probes.Spec, p probes.Process) *probes.Spec {
	t.Helper()
	s, err := probes.Detect(specs, p)
	if err != nil {
		t.Errorf("Detect: %v", err)
	}
	return s
}
