package loader

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanbuilder"
)

// The Go record types bpf2go generated must be the C structs' layout,
// field for field, or decoding reads the wrong bytes.
func TestRecordLayout(t *testing.T) {
	spec, err := bpf.LoadStage()
	if err != nil {
		t.Fatal(err)
	}
	for name, goType := range map[string]any{
		"event": bpf.StageEvent{}, "event_str": bpf.StageEventStr{}, "watch_event": bpf.StageWatchEvent{}, "pyprog": bpf.StagePyprog{},
		"pylayout": bpf.StagePylayout{}, "pyfield": bpf.StagePyfield{}, "watch": bpf.StageWatch{},
		"event_cuda": bpf.StageEventCuda{}, "cuda_snap": bpf.StageCudaSnap{},
	} {
		var st *btf.Struct
		if err := spec.Types.TypeByName(name, &st); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gt := reflect.TypeOf(goType)
		if uintptr(st.Size) != gt.Size() {
			t.Errorf("%s: C %d bytes, Go %d", name, st.Size, gt.Size())
		}
		i := 0
		for j := range gt.NumField() {
			f := gt.Field(j)
			if f.Name == "_" {
				continue
			}
			for i < len(st.Members) && st.Members[i].Name == "" {
				i++
			}
			if i >= len(st.Members) {
				t.Errorf("%s: Go field %s has no C member", name, f.Name)
				break
			}
			if off := uintptr(st.Members[i].Offset.Bytes()); off != f.Offset {
				t.Errorf("%s.%s: C offset %d, Go %d", name, st.Members[i].Name, off, f.Offset)
			}
			i++
		}
	}
	if kindOffset != unsafe.Offsetof(bpf.StageWatchEvent{}.Kind) || kindOffset != unsafe.Offsetof(bpf.StageEvent{}.Kind) {
		t.Errorf("kindOffset %d is not where the records keep their kind", kindOffset)
	}
}

func spec(t *testing.T, stages string) *probes.Spec {
	t.Helper()
	s, err := probes.Parse("t.yaml", []byte("engine: t\nstages:\n"+stages))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hashOf(s string) (uint64, error) { return uint64(len(s)) * 1000003, nil }

// What a stage reads compiles into the steps bpf/pyread.h runs; a path it
// cannot run is refused with a reason (user space reads it instead), and a
// name the function does not have is an error naming the ones it has.
func TestCompilePython(t *testing.T) {
	code := &pyproc.CodeSlots{Names: []string{"self", "batch", "drafts", "out", "cellvar"}, Cell: []bool{false, false, false, false, true},
		ArgCount: 3, NLocalsPlus: 5, FrameBytes: 8 * 20}
	type step struct{ op, name uint8 }
	for _, tc := range []struct {
		name, stage string
		minor       int
		want        [][]step // per field: its steps
		flags       []uint8
		roots       []uint8
		err         string // NotCompiled reason or error
		missing     bool
	}{
		{name: "ids with implicit walk", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n", minor: 12,
			want: [][]step{{{pyOpAttr, 0}, {pyOpIterSeq, 0}, {pyOpAttr, 1}}}, flags: []uint8{pyfIterSeq}, roots: []uint8{pyRootArg}},
		{name: "explicit [*], dict keys", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: \"tokens[*]\"}\n", minor: 13,
			want: [][]step{{{pyOpAttr, 0}, {pyOpIter, 0}}}, flags: []uint8{0}, roots: []uint8{pyRootArg}},
		{name: "when and own counts from the return", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n    when: {arg: batch, path: mode, equals: 2}\n    accepted: {arg: return, path: \"[*]\", len: true}\n", minor: 11,
			want:  [][]step{{{pyOpAttr, 0}, {pyOpIterSeq, 0}, {pyOpAttr, 1}}, {{pyOpAttr, 2}}, {{pyOpIter, 0}, {pyOpLen, 0}}},
			flags: []uint8{pyfIterSeq, 0, pyfLen}, roots: []uint8{pyRootArg, pyRootArg, pyRootReturn}},
		{name: "a key and an index", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: \"meta[\\\"ids\\\"][-1]\"}\n", minor: 12,
			want: [][]step{{{pyOpAttr, 0}, {pyOpKey, 1}, {pyOpIndex, 0}, {pyOpIterSeq, 0}}}, flags: []uint8{pyfIterSeq}, roots: []uint8{pyRootArg}},
		{name: "counts less a number read with them", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n    accepted: {arg: return, path: \"[*]\", sub: {arg: batch, path: k}}\n", minor: 12,
			want:  [][]step{{{pyOpAttr, 0}, {pyOpIterSeq, 0}, {pyOpAttr, 1}}, {{pyOpIter, 0}}, {{pyOpAttr, 2}}},
			flags: []uint8{pyfIterSeq, 0, 0}, roots: []uint8{pyRootArg, pyRootReturn, pyRootArg}},
		{name: "a sub's missing argument", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n    accepted: {arg: return, path: \"[*]\", sub: {arg: sched, path: k}}\n", minor: 12,
			err: "C.f has no argument sched", missing: true},
		{name: "two [*]", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: \"groups[*].reqs[*]\", id: rid}\n", minor: 12, err: "more than one [*]"},
		{name: "3.10: a local is not on the caller's stack", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: out, id: rid}\n", minor: 10, err: "not a named parameter"},
		{name: "3.10: no return value", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, id: rid}\n    accepted: {arg: return, path: \"[*]\"}\n", minor: 10, err: "3.11 and later"},
		{name: "missing argument", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: model_worker_batch, path: reqs, id: rid}\n", minor: 12,
			err: "stage verify: C.f has no argument model_worker_batch (its arguments: self, batch, drafts; other locals: out, cellvar)", missing: true},
		{name: "one of several names", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: [model_worker_batch, batch], path: reqs, id: rid}\n", minor: 12,
			want: [][]step{{{pyOpAttr, 0}, {pyOpIterSeq, 0}, {pyOpAttr, 1}}}, flags: []uint8{pyfIterSeq}, roots: []uint8{pyRootArg}},
		// On 3.10 the argument's own name comes first: batch may be passed by keyword.
		{name: "by position", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: 1, path: reqs, id: rid}\n", minor: 10,
			want: [][]step{{{pyOpAttr, 1}, {pyOpIterSeq, 0}, {pyOpAttr, 2}}}, flags: []uint8{pyfIterSeq}, roots: []uint8{pyRootArg}},
		{name: "a long name", stage: "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: " + strings.Repeat("x", 41) + "}\n", minor: 12, err: "longer than 40"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := spec(t, tc.stage).Stages["verify"]
			p, err := CompilePython(PyCompileInput{Stage: st, Traits: pyproc.Version{Major: 3, Minor: tc.minor}.Traits(), Code: code, Hash: hashOf})
			if tc.err != "" {
				var missing *MissingNameError
				if err == nil || !strings.Contains(err.Error(), tc.err) || errorsAs(err, &missing) != tc.missing {
					t.Fatalf("err %v, want %q (missing name: %v)", err, tc.err, tc.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if int(p.Prog.Nfields) != len(tc.want) || len(p.Fields) != len(tc.want) {
				t.Fatalf("%d fields, want %d", p.Prog.Nfields, len(tc.want))
			}
			if p.Prog.FrameBytes != 160 || p.Prog.Nlocalsplus != 5 || p.Prog.Nargs != 3 {
				t.Errorf("sizes %+v", p.Prog)
			}
			for i, want := range tc.want {
				f := p.Prog.Fields[i]
				var got []step
				for _, s := range f.Steps[:f.Nsteps] {
					got = append(got, step{s.Op, s.Name})
				}
				if !reflect.DeepEqual(got, want) || f.Flags != tc.flags[i] || f.Root != tc.roots[i] {
					t.Errorf("field %d (%s): steps %v flags %d root %d, want %v %d %d", i, p.Fields[i].Path, got, f.Flags, f.Root, want, tc.flags[i], tc.roots[i])
				}
				if f.Root == pyRootArg && f.Slot != 1 {
					t.Errorf("field %d: slot %d, want batch's 1", i, f.Slot)
				}
			}
			n := p.Prog.Names[0]
			if n.Len == 0 || n.Hash != uint64(n.Len)*1000003 {
				t.Errorf("first name %+v: no hash of its own", n)
			}
		})
	}
}

// On 3.10 a parameter is read from what the caller passed, by position or
// by keyword, or from the function's defaults: each field says how it can
// be passed, the name object compared with a call's keyword names and the
// name's entry for a **kwargs dict; *args, **kwargs and other locals exist
// only in the callee's cleared frame and are refused.
func TestCompilePython310Args(t *testing.T) {
	// def f(self, /, batch, drafts=None, *args, dummy_run=False, **kw): out = ...
	code := &pyproc.CodeSlots{
		Names:    []string{"self", "batch", "drafts", "dummy_run", "args", "kw", "out"},
		Cell:     make([]bool, 7),
		NameAddr: []uint64{0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000},
		ArgCount: 3, PosOnlyArgCount: 1, KwOnlyArgCount: 1, VarArgs: true, VarKeywords: true,
	}
	for _, tc := range []struct {
		arg     string
		kind    uint8
		slot    uint16
		argstr  uint64
		hasName bool
		err     string
	}{
		{arg: "self", kind: pyArgPosOnly, slot: 0},
		{arg: "batch", kind: pyArgPos, slot: 1, argstr: 0x2000, hasName: true},
		{arg: "drafts", kind: pyArgPos, slot: 2, argstr: 0x3000, hasName: true},
		{arg: "dummy_run", kind: pyArgKwOnly, slot: 3, argstr: 0x4000, hasName: true},
		{arg: "args", err: "not a named parameter"},
		{arg: "kw", err: "not a named parameter"},
		{arg: "out", err: "not a named parameter"},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			st := spec(t, "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs}\n    when: {arg: "+tc.arg+", equals: false}\n").Stages["verify"]
			p, err := CompilePython(PyCompileInput{Stage: st, Traits: pyproc.Version{Major: 3, Minor: 10}.Traits(), Code: code, Hash: hashOf})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f := p.Prog.Fields[1]
			if f.Root != pyRootArg || f.Slot != tc.slot || f.Argkind != tc.kind || f.Argstr != tc.argstr {
				t.Errorf("root %d slot %d kind %d argstr %#x, want %d %d %d %#x", f.Root, f.Slot, f.Argkind, f.Argstr, pyRootArg, tc.slot, tc.kind, tc.argstr)
			}
			// names: reqs, batch (the requests' root), then this one's.
			n := p.Prog.Names[f.Argname]
			if got := string(int8sToBytes(n.S[:n.Len])); tc.hasName && (got != tc.arg || n.Hash != uint64(len(tc.arg))*1000003) {
				t.Errorf("name %d is %q (hash %#x), want %q", f.Argname, got, n.Hash, tc.arg)
			}
		})
	}
	// Past the eighth parameter too.
	many := &pyproc.CodeSlots{Cell: make([]bool, 14), ArgCount: 14, NameAddr: make([]uint64, 14)}
	for i := range 14 {
		many.Names = append(many.Names, fmt.Sprintf("a%d", i))
	}
	st := spec(t, "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: a1, path: reqs}\n    when: {arg: a13, equals: false}\n").Stages["verify"]
	if p, err := CompilePython(PyCompileInput{Stage: st, Traits: pyproc.Version{Major: 3, Minor: 10}.Traits(), Code: many, Hash: hashOf}); err != nil || p.Prog.Fields[1].Slot != 13 {
		t.Errorf("argument 13: %v", err)
	}
	// A name that cannot be looked up in a dict cannot be read by keyword.
	long := &pyproc.CodeSlots{Names: []string{strings.Repeat("x", 41)}, Cell: []bool{false}, ArgCount: 1, NameAddr: []uint64{0x1000}}
	st = spec(t, "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: "+long.Names[0]+", path: reqs}\n").Stages["verify"]
	if _, err := CompilePython(PyCompileInput{Stage: st, Traits: pyproc.Version{Major: 3, Minor: 10}.Traits(), Code: long, Hash: hashOf}); err == nil || !strings.Contains(err.Error(), "passed by keyword") {
		t.Errorf("a 41-byte parameter name: %v", err)
	}
}

func int8sToBytes(s []int8) []byte {
	b := make([]byte, len(s))
	for i, c := range s {
		b[i] = byte(c)
	}
	return b
}

func errorsAs(err error, target **MissingNameError) bool {
	m, ok := err.(*MissingNameError)
	if ok {
		*target = m
	}
	return ok
}

// The payload stream decodes into each field's values or its error; a
// truncated or forged stream is an error, never a panic or wrong values.
func TestDecodePyPayload(t *testing.T) {
	str := func(s string) []byte {
		b := []byte{ptStr, 1, 0, 0}
		binary.LittleEndian.PutUint16(b[2:], uint16(len(s)))
		return append(b, s...)
	}
	i64 := func(v int64) []byte {
		b := make([]byte, 9)
		b[0] = ptInt
		binary.LittleEndian.PutUint64(b[1:], uint64(v))
		return b
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	errRec := cat([]byte{pfErr, 4, 2, 3, 0}, make([]byte, 8))
	ucs2 := []byte{ptStr, 2, 4, 0, 0xe9, 0, 0x41, 0x26}
	good := cat([]byte{pfBegin, 0, pfList}, str("a"), str("bc"), []byte{pfEnd},
		[]byte{pfBegin, 1}, i64(-7), []byte{pfEnd},
		[]byte{pfBegin, 2}, errRec,
		[]byte{pfBegin, 3}, []byte{ptBool, 1}, []byte{pfEnd},
		[]byte{pfBegin, 4}, ucs2, []byte{pfEnd},
		// Read at a push: the argument's address, then its values.
		[]byte{pfBegin, 5, pfRoot, 0x10, 0x20, 0, 0, 0, 0, 0, 0, pfList}, i64(3), []byte{pfEnd})
	f, err := decodePyPayload(good, 6)
	if err != nil {
		t.Fatal(err)
	}
	if !f[0].List || !reflect.DeepEqual(f[0].Values, []any{"a", "bc"}) {
		t.Errorf("field 0: %+v", f[0])
	}
	if f[1].List || !reflect.DeepEqual(f[1].Values, []any{int64(-7)}) {
		t.Errorf("field 1: %+v", f[1])
	}
	if e := f[2].Err; e == nil || e.Code != 4 || e.Step != 2 || e.Item != 3 || !strings.Contains(e.Error(), "item 3: no such attribute") {
		t.Errorf("field 2: %+v", f[2].Err)
	}
	if !reflect.DeepEqual(f[3].Values, []any{true}) || !reflect.DeepEqual(f[4].Values, []any{"é\u2641"}) {
		t.Errorf("fields 3, 4: %+v %+v", f[3], f[4])
	}
	if f[5].Root != 0x2010 || !f[5].List || !reflect.DeepEqual(f[5].Values, []any{int64(3)}) || f[0].Root != 0 {
		t.Errorf("field 5: %+v (field 0's root %#x)", f[5], f[0].Root)
	}
	for cut := range len(good) {
		if _, err := decodePyPayload(good[:cut], 6); err == nil {
			t.Errorf("cut at %d: no error", cut)
		}
	}
	for _, bad := range [][]byte{
		{pfBegin, 1, pfEnd},       // fields out of order
		{0x99},                    // not a field
		{pfBegin, 0, 0x77, pfEnd}, // unknown tag
		{pfBegin, 0, ptStr, 3, 2, 0, 'a', 'b', pfEnd}, // 2 bytes of 3-byte characters
	} {
		if _, err := decodePyPayload(bad, 1); err == nil {
			t.Errorf("%x: no error", bad)
		}
	}
}

// FuzzDecodePyPayload: whatever the bytes, decoding ends with fields or an
// error.
func FuzzDecodePyPayload(f *testing.F) {
	f.Add([]byte{pfBegin, 0, pfList, ptInt, 1, 0, 0, 0, 0, 0, 0, 0, pfEnd}, 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		_, _ = decodePyPayload(b, n%9)
	})
}

type names map[uint64]string

func (n names) Name(ip uint64) string { return n[ip] }
func (n names) Has(fn string) bool {
	for _, v := range n {
		if strings.HasPrefix(v, fn+"+") {
			return true
		}
	}
	return false
}

// The watch decoder in a table: +1s and -1s from the places CPython makes
// them, and from places that are no call.
func TestWatchDecoder(t *testing.T) {
	const (
		push = iota + 1
		pop
		evalLoop
		getCode
		dealloc
		unnamed
	)
	sym := names{push: "_PyEvalFramePushAndInit+0x30", pop: "_PyEvalFrameClearAndPop+0x12", evalLoop: "_PyEval_EvalFrameDefault+0x99",
		getCode: "func_get_code+0x4", dealloc: "frame_dealloc+0x20"}
	type hit struct {
		refcnt uint64
		ip     uint64
		frames int // -1: not counted
		want   Hit
	}
	for _, tc := range []struct {
		name     string
		owns     bool // 3.12+
		stripped bool
		hits     []hit
	}{
		{"push and pop", true, false, []hit{{11, push, -1, HitEntry}, {10, pop, 0, HitExit}}},
		{"inline push from the eval loop is tentative; f.__code__ read cancels it", true, false,
			[]hit{{11, evalLoop, -1, HitEntry}, {10, evalLoop, 0, HitCancel}}},
		{"f.__code__ taken and dropped outside a call", true, false, []hit{{11, getCode, -1, HitIgnored}, {10, evalLoop, 0, HitIgnored}}},
		{"frame_dealloc on 3.12+ is no call's end", true, false, []hit{{11, push, -1, HitEntry}, {12, pop, -1, HitIgnored}, {11, pop, 0, HitExit}, {10, dealloc, 0, HitIgnored}}},
		{"frame_dealloc on 3.10 is the pop", false, false, []hit{{11, push, -1, HitEntry}, {10, dealloc, 0, HitExit}}},
		{"a reference dropped while the call still runs (logging)", true, false,
			[]hit{{11, push, -1, HitEntry}, {12, getCode, 2, HitIgnored}, {11, pop, 2, HitIgnored}, {10, pop, 0, HitExit}}},
		{"stripped: an unnamed +1 while the function runs is a reference", true, true,
			[]hit{{11, unnamed, 0, HitEntry}, {12, unnamed, 2, HitIgnored}, {11, unnamed, 3, HitIgnored}, {10, unnamed, 0, HitExit}}},
		{"stripped: f.__code__ taken by unnamed code outside a call, and dropped by a frame's clear after the eval loop's own pair: withdrawn", true, true,
			[]hit{{11, unnamed, 0, HitEntry}, {12, evalLoop, 0, HitEntry}, {11, evalLoop, 0, HitCancel}, {10, unnamed, 0, HitCancel}, {11, unnamed, 0, HitEntry}, {10, unnamed, 0, HitExit}}},
		{"a pop lost to a full ring: the frames bring the open count down, so a reference dropped while the next call runs is still no pop", true, false,
			[]hit{{11, push, -1, HitEntry}, {12, push, -1, HitEntry}, {10, pop, 0, HitExit},
				{11, push, -1, HitEntry}, {12, getCode, 2, HitIgnored}, {11, pop, 2, HitIgnored}, {10, pop, 0, HitExit}}},
		{"freed", true, false, []hit{{0, dealloc, -1, HitFreed}}},
		{"no change", true, false, []hit{{10, push, -1, HitIgnored}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n Namer = sym
			if tc.stripped {
				// Debian's 3.11: .dynsym names the eval loop, nothing static.
				n = names{evalLoop: sym[evalLoop]}
			}
			d := newWatchDecoder(n)
			d.frameObjectOwnsCode = tc.owns
			d.watch(3, 0x5000, 10)
			for i, h := range tc.hits {
				w := &bpf.StageWatchEvent{Site: 3, Tid: 7, Addr: 0x5000, Refcnt: h.refcnt, Ip: h.ip}
				if h.frames >= 0 {
					w.Flags, w.Frames = wFrames, uint8(h.frames)
				}
				if got := d.classify(w); got != h.want {
					t.Errorf("hit %d (count %d at %s): %d, want %d", i, h.refcnt, sym[h.ip], got, h.want)
				}
			}
			if got := d.classify(&bpf.StageWatchEvent{Site: 3, Addr: 0x6000, Refcnt: 99}); got != HitStale {
				t.Errorf("a hit on a code object no longer watched: %d, want stale", got)
			}
		})
	}
}

// On 3.10 a stage whose counts come from its return loses the counts, not
// the attach: what it reads from its arguments stays.
func TestWithoutReturnReads(t *testing.T) {
	for _, tc := range []struct {
		name, stage string
		dropped     bool
	}{
		{"counts from the return", "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n    accepted: {arg: return, path: \"[*]\"}\n", true},
		{"a sub from the return", "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n    accepted: {arg: batch, path: \"n[*]\", sub: {arg: return, path: k}}\n", true},
		{"counts from an argument", "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n    accepted: {arg: batch, path: \"n[*]\"}\n", false},
		{"no counts", "  verify:\n    module: m\n    qualname: C.f\n    requests: {arg: batch, path: reqs, id: rid}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := spec(t, tc.stage).Stages["verify"]
			kept, dropped := withoutReturnReads(st)
			if dropped != tc.dropped {
				t.Fatalf("dropped %v, want %v", dropped, tc.dropped)
			}
			if kept.Requests != st.Requests || (kept.Accepted == nil) != (dropped || st.Accepted == nil) {
				t.Errorf("kept %+v from %+v", kept, st)
			}
			if dropped && st.Accepted == nil {
				t.Error("the spec's own stage was changed")
			}
		})
	}
}

// A pop's depth, for the span builder: the calls of the site still running
// on the thread, counting the one ending; 0 where the frames were not counted.
func TestPopDepth(t *testing.T) {
	d := newWatchDecoder(names{1: "_PyEvalFrameClearAndPop+0x12"})
	for _, tc := range []struct {
		flags, frames uint8
		current       bool // 3.11 pops a frame while it is still the current one
		want          int
	}{
		{0, 0, false, 0},
		{wFrames, 0, false, 1},
		{wFrames, 2, false, 2},
		{wFrames, 4, false, 3},
		{wFrames, 3, true, 1},
		{wFrames, 3, false, 2},
	} {
		d.popsCurrentFrame = tc.current
		if got := d.popDepth(&bpf.StageWatchEvent{Flags: tc.flags, Frames: tc.frames, Ip: 1}); got != tc.want {
			t.Errorf("flags %d frames %d (pops current %v): depth %d, want %d", tc.flags, tc.frames, tc.current, got, tc.want)
		}
	}
}

// A hit that says events of its thread were lost hands the count to the
// thread's next event, even when the hit itself is no call; a pop carries
// its depth.
func TestWatchDropNotes(t *testing.T) {
	sym := names{1: "_PyEvalFramePushAndInit+0x30", 2: "_PyEvalFrameClearAndPop+0x12"}
	s := &Session{hits: newWatchDecoder(sym), py: newPyAssembler(func(uint32) int { return 0 })}
	s.hits.frameObjectOwnsCode = true
	s.hits.watch(3, 0x5000, 10)
	hit := func(refcnt, ip uint64, flags, frames uint8, tid uint32) (spanbuilder.Event, bool) {
		var ev spanbuilder.Event
		ok := s.decodeWatch(&bpf.StageWatchEvent{Site: 3, Tid: tid, Addr: 0x5000, Refcnt: refcnt, Ip: ip, Flags: flags, Frames: frames}, nil, &ev)
		return ev, ok
	}
	if _, ok := hit(10, 1, wDropped, 0, 7); ok { // no change of count: no call, but a drop to carry
		t.Fatal("a hit that changed nothing made an event")
	}
	if ev, ok := hit(11, 1, 0, 0, 8); !ok || ev.Dropped != 0 {
		t.Errorf("another thread's entry: ok %v, Dropped %d, want true and 0", ok, ev.Dropped)
	}
	if ev, ok := hit(12, 1, 0, 0, 7); !ok || ev.Exit || ev.Dropped != 1 {
		t.Errorf("the thread's next entry: ok %v exit %v Dropped %d, want an entry carrying 1", ok, ev.Exit, ev.Dropped)
	}
	if ev, ok := hit(11, 2, wFrames, 0, 7); !ok || !ev.Exit || ev.Dropped != 0 || ev.Depth != 1 {
		t.Errorf("its pop: ok %v exit %v Dropped %d Depth %d, want an exit at depth 1, no drop", ok, ev.Exit, ev.Dropped, ev.Depth)
	}
}

// Every reason bpf/pyread.h's enum py_err names has its text, and no text
// is kept for a reason the C does not name: a reason added or reordered
// in the C cannot be shown as another's.
func TestPyErrText(t *testing.T) {
	spec, err := bpf.LoadStage()
	if err != nil {
		t.Fatal(err)
	}
	var enum *btf.Enum
	if err := spec.Types.TypeByName("py_err", &enum); err != nil {
		t.Fatal(err)
	}
	named := map[bpf.StagePyErr]bool{}
	for _, v := range enum.Values {
		code := bpf.StagePyErr(v.Value)
		named[code] = true
		if v.Name == "PY_OK" {
			continue
		}
		msg := (&PyReadError{Code: uint8(code), Item: -1}).Error()
		if _, ok := pyErrText[code]; !ok || strings.HasPrefix(msg, "error ") {
			t.Errorf("%s (%d) has no text: %q", v.Name, v.Value, msg)
		}
	}
	for code, text := range pyErrText {
		if !named[code] {
			t.Errorf("text %q for code %d, which enum py_err does not name", text, code)
		}
	}
	if len(named) < 10 {
		t.Errorf("enum py_err has %d values in the BTF: the generated enums are not the C's", len(named))
	}
}

// Frames kept past their return (3.10, 3.11): kept_return's hit ends the
// call with no change of the count, and the frame's later death drops the
// reference in frame_dealloc, which is no call's end.
func TestWatchDecoderKept(t *testing.T) {
	const (
		push = iota + 1
		pop
		keptAt
		dealloc
	)
	sym := names{push: "_PyEvalFramePushAndInit+0x30", pop: "_PyFrame_Clear+0x98", keptAt: "_PyFrame_Clear+0x116", dealloc: "frame_dealloc+0x20"}
	type hit struct {
		refcnt uint64
		ip     uint64
		frames int // frames of the code on the stack, times 2, +1 if the innermost; -1: not counted
		kept   bool
		want   Hit
	}
	for _, tc := range []struct {
		name  string
		py311 bool
		hits  []hit
	}{
		{"3.11: kept frame ends at kept_return; its frame_dealloc, while the next call is innermost, is no end", true, []hit{
			{11, push, -1, false, HitEntry}, {11, keptAt, 1, true, HitExit},
			{12, push, -1, false, HitEntry}, {11, dealloc, 3, false, HitIgnored}, {10, pop, 1, false, HitExit}}},
		{"3.10: kept frame ends at kept_return; freed while the next call runs, no pop", false, []hit{
			{11, push, -1, false, HitEntry}, {11, keptAt, 0, true, HitExit},
			{12, push, -1, false, HitEntry}, {11, dealloc, 2, false, HitIgnored}, {10, dealloc, 0, false, HitExit}}},
		{"3.10: kept frame freed between calls, no pop", false, []hit{
			{11, push, -1, false, HitEntry}, {11, keptAt, 0, true, HitExit}, {10, dealloc, 0, false, HitIgnored}}},
		{"a kept_return hit for a recursive call's inner frame leaves the outer open", false, []hit{
			{11, push, -1, false, HitEntry}, {12, push, -1, false, HitEntry}, {12, keptAt, 2, true, HitExit}, {11, dealloc, 0, false, HitExit}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newWatchDecoder(sym)
			d.popsCurrentFrame, d.keptDealloc = tc.py311, tc.py311
			d.watch(3, 0x5000, 10)
			for i, h := range tc.hits {
				w := &bpf.StageWatchEvent{Site: 3, Tid: 7, Addr: 0x5000, Refcnt: h.refcnt, Ip: h.ip}
				if h.frames >= 0 {
					w.Flags, w.Frames = wFrames, uint8(h.frames)
				}
				if h.kept {
					w.Flags |= wKept
				}
				if got := d.classify(w); got != h.want {
					t.Errorf("hit %d (count %d at %s): %d, want %d", i, h.refcnt, sym[h.ip], got, h.want)
				}
			}
		})
	}
}

// Where the interpreter names its frame pops (Debian trixie's 3.13 exports
// that function, and pushes in unnamed code too), a -1 from code without a
// name is no pop: a watchdog thread's f.f_code, taken and dropped by
// unnamed code, was taken for calls.
func TestWatchDecoderUnnamed(t *testing.T) {
	const (
		pop = iota + 1
		evalLoop
		unnamed
	)
	trixie := names{pop: "_PyEval_FrameClearAndPop+0xa6", evalLoop: "_PyEval_EvalFrameDefault+0xf1"}
	debian := names{evalLoop: "_PyEval_EvalFrameDefault+0xf1"}
	for _, tc := range []struct {
		name  string
		n     names
		ips   []uint64
		wants []Hit
	}{
		{"pops named: an unnamed -1 withdraws the unnamed +1; a named pop ends a call pushed by unnamed code", trixie,
			[]uint64{unnamed, unnamed, unnamed, pop}, []Hit{HitEntry, HitCancel, HitEntry, HitExit}},
		{"pops unnamed (Debian's 3.11): unnamed code is trusted", debian,
			[]uint64{unnamed, unnamed, unnamed, unnamed}, []Hit{HitEntry, HitExit, HitEntry, HitExit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newWatchDecoder(tc.n)
			d.frameObjectOwnsCode = true
			d.watch(3, 0x5000, 10)
			for i, ip := range tc.ips {
				w := &bpf.StageWatchEvent{Site: 3, Tid: 7, Addr: 0x5000, Refcnt: uint64(11 - i%2), Ip: ip, Flags: wFrames}
				if got := d.classify(w); got != tc.wants[i] {
					t.Errorf("hit %d (at %q): %d, want %d", i, tc.n[ip], got, tc.wants[i])
				}
			}
		})
	}
}

// An entry is tentative where the +1 may be a reference rather than a push
// (from the eval loop, or from code without a name): the builder withdraws
// it if no pop ever closes it.
func TestWatchDecoderTentative(t *testing.T) {
	const (
		push = iota + 1
		evalLoop
		unnamed
	)
	d := newWatchDecoder(names{push: "_PyEvalFramePushAndInit+0x30", evalLoop: "_PyEval_EvalFrameDefault+0x99"})
	d.frameObjectOwnsCode = true
	d.watch(3, 0x5000, 10)
	for i, h := range []struct {
		ip        uint64
		tentative bool
	}{{push, false}, {evalLoop, true}, {unnamed, true}} {
		w := &bpf.StageWatchEvent{Site: 3, Tid: 7, Addr: 0x5000, Refcnt: uint64(11 + i), Ip: h.ip}
		if got := d.classify(w); got != HitEntry || d.Tentative != h.tentative {
			t.Errorf("entry %d: %d, tentative %v; want an entry, tentative %v", i, got, d.Tentative, h.tentative)
		}
	}
}
