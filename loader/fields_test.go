package loader

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/probes"
)

func TestIntVariable(t *testing.T) {
	f := openObject(t, "testdata/structs.o")
	for _, tc := range []struct {
		name  string
		want  int64
		found bool
	}{
		{"LLAMA_BUILD_NUMBER", 10573, true}, // .data
		{"ZERO_BUILD", 0, true},             // .bss
		{"NO_SUCH_BUILD", 0, false},
	} {
		n, ok, err := intVariable(f, tc.name)
		if err != nil || ok != tc.found || n != tc.want {
			t.Errorf("%s: %d, %v, %v; want %d, %v", tc.name, n, ok, err, tc.want, tc.found)
		}
	}
}

// A forged symbol pointing past its section is an error, not a read.
func TestIntVariableForged(t *testing.T) {
	data, ef := readObject(t, "testdata/structs.o")
	syms, _ := ef.Symbols()
	symtab := ef.Section(".symtab")
	for i, s := range syms {
		if s.Name != "LLAMA_BUILD_NUMBER" {
			continue
		}
		// Entry i+1 (debug/elf leaves out the null symbol); st_value at +8.
		b := bytes.Clone(data)
		binary.LittleEndian.PutUint64(b[symtab.Offset+uint64(i+1)*24+8:], 1<<40)
		f, err := elfsym.NewFile(bytes.NewReader(b), int64(len(b)), "forged.o")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := intVariable(f, "LLAMA_BUILD_NUMBER"); err == nil || !strings.Contains(err.Error(), "forged.o: symbol LLAMA_BUILD_NUMBER at 0x10000000000 is not inside its section .data") {
			t.Errorf("forged symbol: %v", err)
		}
		return
	}
	t.Fatal("no LLAMA_BUILD_NUMBER in structs.o")
}

func TestResolvedStage(t *testing.T) {
	spec, err := probes.Parse("t.yaml", []byte(`engine: e
fields:
  build: {binary: [b], symbol: N}
  releases:
    - {name: r1, since: 1, offsets: {s.a: 112, s.t: 240, t.id: 0}}
stages:
  verify: {binary: b, symbol: v, scope: batch}
  accept:
    binary: b
    symbol: a
    request_id: {at: entry, from: arg3, deref: [s.t - s.a, t.id], type: int, size: 4}
    values:
      plain: {at: entry, from: arg4, deref: [8, 16]}
      mixed: {at: entry, from: arg3, deref: [-s.a, 4]}
`))
	if err != nil {
		t.Fatal(err)
	}
	st := spec.Stages[probes.Accept]
	layout := &Layout{Offsets: map[string]int64{"s.a": 104, "s.t": 232, "t.id": 8}}
	got, err := ResolvedStage(st, layout)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v      *probes.Value
		deref  []int64
		origin string
	}{
		{got.RequestID, []int64{128, 8}, "deref [128 = s.t-s.a, 8 = t.id]"},
		{got.Values["plain"], []int64{8, 16}, ""},
		{got.Values["mixed"], []int64{-104, 4}, "deref [-104 = -s.a, 4]"},
	} {
		if fmt.Sprint(tc.v.Deref) != fmt.Sprint(tc.deref) || tc.v.Origin != tc.origin {
			t.Errorf("deref %v %q, want %v %q", tc.v.Deref, tc.v.Origin, tc.deref, tc.origin)
		}
	}
	// The spec's stage is not changed: another process may be another build.
	if st.RequestID.Deref[0] != 0 || st.RequestID.Origin != "" {
		t.Errorf("the spec's stage changed: %v %q", st.RequestID.Deref, st.RequestID.Origin)
	}
	if _, err := ResolvedStage(st, &Layout{Offsets: map[string]int64{"s.a": 1}}); err == nil || err.Error() != "stage accept: request_id: no offset for field s.t" {
		t.Errorf("missing field: %v", err)
	}
	if _, err := ResolvedStage(st, nil); err == nil || !strings.Contains(err.Error(), "names fields, and the spec has no fields section") {
		t.Errorf("no layout: %v", err)
	}
}
