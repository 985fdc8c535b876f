package probes_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specprobe/specprobe/probes"
)

// FuzzParse checks that Parse never panics, that every failure is a
// *probes.Error naming the file, and that every spec it accepts keeps the
// invariants the loader and the BPF program rely on.
func FuzzParse(f *testing.F) {
	catalog, err := filepath.Glob("catalog/*.yaml")
	if err != nil || len(catalog) == 0 {
		f.Fatalf("no catalog files: %v", err)
	}
	for _, name := range catalog {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, bad := range []string{
		"",
		"engine: [a\n",
		"- a\n",
		minimal + "    request_id: {at: entry, from: arg0, type: string}\n",
		minimal + "    values:\n      x: {at: entry, from: ret, deref: [0, 8, 16, 24]}\n",
		minimal + "    values:\n      x: {at: entry, from: arg0, type: string, size: 3}\n",
		minimal + "  accept:\n    binary: b\n    symbol: a\n    scope: batch\n",
		minimal + "  draft:\n    binary: b\n    symbol: d\n",
		"engine: e\nstages:\n  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: [batch, model_worker_batch], path: reqs, id: rid}\n    when: {arg: 1, path: mode, equals: 2}\n",
		"engine: e\nstages:\n  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n    when: {arg: batch, path: mode, equals: [2, 5]}\n",
		"engine: e\nmatch:\n  ranks:\n    tp: {title: '_TP([0-9]+)', default: 0, only: 0, attribute: e.tp}\nstages:\n  verify: {module: m, qualname: f}\n",
		fieldsSpec,
		minimal + "request_boundary: {module: m, qualname: C.generate}\n",
		minimal + "request_boundary:\n  binary: b\n  symbol: run\n",
		"engine: e\nstages:\n  verify: &v\n    binary: b\n    symbol: v\n    scope: batch\n  draft: *v\n",
	} {
		f.Add([]byte(bad))
	}
	const file = "fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		// The fuzzer has no hang detection: crash the worker (which saves the
		// input as a crasher) if one spec takes unreasonably long.
		watchdog := time.AfterFunc(10*time.Second, func() {
			panic(fmt.Sprintf("Parse ran over 10s on %d bytes: %q", len(data), data))
		})
		defer watchdog.Stop()
		s, err := probes.Parse(file, data)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned both a spec and %v", err)
			}
			var pe *probes.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %q is not a *probes.Error", err, err)
			}
			if !strings.HasPrefix(err.Error(), file+":") {
				t.Fatalf("error %q does not start with the file name", err)
			}
			if pe.Line < 0 {
				t.Fatalf("negative line in %q", err)
			}
			return
		}
		if s == nil {
			t.Fatal("Parse returned neither a spec nor an error")
		}
		if s.File != file {
			t.Errorf("File = %q", s.File)
		}
		if s.Stages[probes.Verify] == nil {
			t.Fatalf("accepted a spec without a verify stage")
		}
		for _, r := range s.Match.Ranks {
			if r.Title == nil || r.Title.NumSubexp() != 1 || (r.Only != nil && *r.Only < 0) || (r.Default != nil && *r.Default < 0) {
				t.Fatalf("rank %+v", r)
			}
			if _, err := s.Match.RanksOf(string(data)); err != nil && !strings.Contains(err.Error(), "is not a rank") {
				t.Fatalf("RanksOf: %v", err)
			}
		}
		for name, st := range s.Stages {
			if st == nil || st.Name != name {
				t.Fatalf("stage %q is %+v", name, st)
			}
			switch st.Scope {
			case probes.ScopeRequest:
				if st.RequestID == nil {
					t.Fatalf("stage %s: scope request without request_id", name)
				}
			case probes.ScopeBatch:
				if st.RequestID != nil {
					t.Fatalf("stage %s: scope batch with a request_id", name)
				}
				if name == probes.Accept && !st.IsPython() {
					t.Fatalf("native accept stage with scope batch")
				}
			default:
				t.Fatalf("stage %s: scope %q", name, st.Scope)
			}
			for b, vals := range st.Boundaries() {
				if len(vals) > probes.MaxValues {
					t.Fatalf("stage %s: %d values at boundary %d", name, len(vals), b)
				}
				strs := 0
				for _, v := range vals {
					if v.Value.Type == probes.TypeString {
						strs++
					}
				}
				if strs > 1 {
					t.Fatalf("stage %s: %d strings at boundary %d", name, strs, b)
				}
			}
			check := func(what string, v *probes.Value) {
				if len(v.Deref) > probes.MaxDeref {
					t.Fatalf("%s.%s: deref of %d", name, what, len(v.Deref))
				}
				if v.At != probes.Entry && v.At != probes.Exit {
					t.Fatalf("%s.%s: at %d", name, what, v.At)
				}
				if v.From > probes.SourceRet || (v.From == probes.SourceRet && v.At == probes.Entry) {
					t.Fatalf("%s.%s: from %v at %v", name, what, v.From, v.At)
				}
				switch v.Size {
				case 1, 2, 4, 8:
				default:
					t.Fatalf("%s.%s: size %d", name, what, v.Size)
				}
				if v.ElemSize < 1 {
					t.Fatalf("%s.%s: elem_size %d", name, what, v.ElemSize)
				}
			}
			checkArg := func(what, arg string, c *probes.ArgChoice) {
				switch {
				case c == nil && arg == "":
					t.Fatalf("%s.%s: no argument", name, what)
				case c != nil && arg != "":
					t.Fatalf("%s.%s: both %q and a choice %v", name, what, arg, c)
				case c != nil && len(c.Names) == 0 && (c.Position < 0 || c.Position > 255):
					t.Fatalf("%s.%s: position %d", name, what, c.Position)
				case c != nil && len(c.Names) > 8:
					t.Fatalf("%s.%s: %d names", name, what, len(c.Names))
				}
				if c != nil {
					for _, n := range c.Names {
						if n == "" || n == probes.ReturnArg {
							t.Fatalf("%s.%s: choice of %q", name, what, n)
						}
					}
				}
			}
			if r := st.Requests; r != nil {
				checkArg("requests", r.Arg, r.ArgChoice)
			}
			if w := st.When; w != nil {
				checkArg("when", w.Arg, w.ArgChoice)
			}
			for what, l := range map[string]*probes.PyList{"accepted": st.Accepted, "drafted": st.Drafted} {
				if l != nil {
					checkArg(what, l.Arg, l.ArgChoice)
				}
			}
			if st.RequestID != nil {
				check("request_id", st.RequestID)
			}
			for vn, v := range st.Values {
				if v == nil {
					t.Fatalf("%s.%s: nil value", name, vn)
				}
				check(vn, v)
			}
		}
	})
}
