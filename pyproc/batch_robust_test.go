package pyproc

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// sameEval checks that Eval and EvalItemByItem agree on obj.path: the same
// value, or the same error; it returns Eval's.
func sameEval(t *testing.T, p *Process, obj uint64, path, what string) (Value, error) {
	t.Helper()
	v, err := p.Eval(obj, path)
	old, oldErr := p.EvalItemByItem(obj, path)
	if fmt.Sprint(err) != fmt.Sprint(oldErr) || !reflect.DeepEqual(v, old) {
		t.Errorf("%s: Eval(%#x, %q) = %.200v, %v\n  item by item %.200v, %v", what, obj, path, v, err, old, oldErr)
	}
	return v, err
}

// TestBatchGarbage runs Eval and EvalItemByItem over the same random
// memory laid out like objects (see TestGarbageEval): the batch must read
// what the item walk reads, error for error.
func TestBatchGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	iterations := 200
	if testing.Short() {
		iterations = 40
	}
	paths := append([]string{"[*].a", "[*].b[0]", "[*][*]", "[*].a.b", "[-1][*].a"}, garbagePaths...)
	for i := 0; i < iterations; i++ {
		l := garbageLayouts()[i%4]
		p, f := garbageProcess(rng, l)
		extra := func(i uint64) uint64 { return fakeBase + 0x100*(11+i) }
		p.types.list, p.types.long, p.types.boolean, p.types.float = extra(1), extra(2), extra(3), extra(4)
		p.types.none, p.types.member, p.types.getset = extra(5), extra(6), extra(7)
		all := []uint64{p.types.str, p.types.dict, p.types.tuple, p.types.typ, p.types.list, p.types.long,
			p.types.boolean, p.types.float, p.types.member}
		for k := 0; k < 800; k++ {
			f.put64(fakeBase+uint64(rng.IntN(len(f.data)-8))&^7, all[rng.IntN(len(all))])
		}
		// Lists with small sizes, so that [*] goes on to their items.
		for k := 0; k < 60; k++ {
			a := fakeBase + uint64(rng.IntN(len(f.data)-0x40))&^7
			f.put64(a+8, p.types.list)
			f.put64(a+l.ListSize, uint64(rng.IntN(6)))
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for j := 0; j < 40; j++ {
				sameEval(t, p, fakeBase+uint64(rng.IntN(len(f.data)))&^7, paths[rng.IntN(len(paths))], fmt.Sprintf("iteration %d", i))
			}
		}()
		waitReaders(t, done, fmt.Sprintf("iteration %d (CPython %s layout)", i, l.Version))
	}
}

// shiftingMemory changes the memory after each call: a list that grows,
// shrinks or loses its items between the reads of one Eval.
type shiftingMemory struct {
	*fakeMemory
	calls int
	shift func(call int)
}

func (m *shiftingMemory) ReadAt(b []byte, addr uint64) error {
	err := m.fakeMemory.ReadAt(b, addr)
	m.calls++
	m.shift(m.calls)
	return err
}

func (m *shiftingMemory) ReadV(rs []Read) error {
	err := readV(m.fakeMemory, rs)
	m.calls++
	m.shift(m.calls)
	return err
}

// TestBatchListChanges changes a list of requests between the reads of
// one Eval — its size, its item array, items freed — at every point in the
// Eval: each must return the right rids, or an error that names a path,
// never a panic, a hang, or rids that were never there.
func TestBatchListChanges(t *testing.T) {
	for call := 1; call <= 12; call++ {
		for _, change := range []string{"grow", "shrink", "null items", "items freed", "array moved"} {
			h := newFakeHeap(t)
			l := &h.p.layout
			req := h.class("Req", []string{"rid"}, nil)
			var reqs []uint64
			rids := map[string]bool{}
			for i := 0; i < 40; i++ {
				rid := fmt.Sprintf("r%02d", i)
				rids[rid] = true
				reqs = append(reqs, h.instance(req, h.str(rid)))
			}
			batch := h.list(reqs...)
			arr, _ := h.p.m.u64(batch + l.ListItems)
			h.p.Eval(batch, "[*].rid") // caches warm
			sm := &shiftingMemory{fakeMemory: h.f}
			sm.shift = func(n int) {
				if n != call {
					return
				}
				switch change {
				case "grow":
					h.put(batch+l.ListSize, 4000)
				case "shrink":
					h.put(batch+l.ListSize, 3)
				case "null items":
					for i := range reqs {
						h.put(arr+8*uint64(i), 0)
					}
				case "items freed":
					for _, r := range reqs {
						h.put(r+8, 0)
						h.put(h.values(r), 0x10)
					}
				case "array moved":
					h.put(batch+l.ListItems, 0x10)
				}
			}
			h.p.m = mem{sm}
			what := fmt.Sprintf("%s after call %d", change, call)
			done := make(chan struct{})
			go func() {
				defer close(done)
				v, err := h.p.Eval(batch, "[*].rid")
				if err != nil {
					var pe *PathError
					if !strings.Contains(err.Error(), "[") && !asPathError(err, &pe) {
						t.Errorf("%s: error names no path: %v", what, err)
					}
					return
				}
				for _, rid := range v.([]Value) {
					if s, ok := rid.(string); !ok || !rids[s] {
						t.Errorf("%s: read %v, which no request had", what, rid)
					}
				}
			}()
			waitReaders(t, done, what)
		}
	}
}

func asPathError(err error, pe **PathError) bool {
	e, ok := err.(*PathError)
	*pe = e
	return ok
}

// TestBatchCycles: a list that holds itself, read through [*] many times
// over and converted whole, stops at maxVisits or maxNest as the item walk
// does, and soon.
func TestBatchCycles(t *testing.T) {
	h := newFakeHeap(t)
	l := &h.p.layout
	cyc := h.list(0, 0)
	arr, _ := h.p.m.u64(cyc + l.ListItems)
	h.put(arr, cyc)
	h.put(arr+8, cyc)
	for _, path := range []string{"", "[*]", strings.Repeat("[*]", 20), "[0][1][0][1]", "[*][0][*]"} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			sameEval(t, h.p, cyc, path, "cyclic list")
			_, err := h.p.Eval(cyc, path)
			if err == nil || !strings.Contains(err.Error(), "objects read") && !strings.Contains(err.Error(), "nested more than") {
				t.Errorf("Eval(cycle, %q): %v, want the visit or nesting bound", path, err)
			}
		}()
		waitReaders(t, done, "cyclic list "+path)
	}
}

// fuzzHeap is a batch of requests of each kind the batch reads fast: values
// on shared keys with a class attribute, __slots__, a dict's keys,
// instances with dicts of their own; lookups probe by hash.
func fuzzHeap(t *testing.T) (*fakeHeap, uint64) {
	h := newHashedHeap(t)
	req := h.class("Req", []string{"a", "rid"}, map[string]uint64{"kind": h.str("plain")})
	sreq := h.slotted("SReq", []string{"s", "n"})
	big := h.class("Big", nil, nil)
	fields := []string{"rid", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8"}
	var reqs, sreqs, bigs, counts []uint64
	var names []string
	for i := 0; i < 8; i++ {
		rid := h.str(fmt.Sprintf("rid-%d", i))
		reqs = append(reqs, h.instance(req, h.int(uint64(i)), rid))
		sreqs = append(sreqs, h.object(sreq, h.str(fmt.Sprintf("s-%d", i)), h.int(uint64(2*i))))
		names, counts = append(names, fmt.Sprintf("k%d", i)), append(counts, h.int(uint64(i)))
		var vals []uint64
		for j := range fields {
			vals = append(vals, h.int(uint64(10*i+j)))
		}
		bigs = append(bigs, h.dictInstance(big, fields, vals))
	}
	return h, h.list(h.list(reqs...), h.list(sreqs...), h.dict(names, counts), h.list(bigs...))
}

var fuzzPaths = []string{"[0][*].rid", "[0][*].a", "[0][*].kind", "[1][*].s", "[1][*].n", "[2][*]", "[0][-1].rid", "[0]", "[1][*]",
	"[3][*].rid", "[3][*].f5", "[3][*].f8"}

// FuzzBatchEval overwrites bytes of fuzzHeap after Evals have filled the
// caches, then reads every path in batches and item by item: the two must
// agree (the caches must see the change), and neither may panic or hang.
func FuzzBatchEval(f *testing.F) {
	f.Add(uint16(0), []byte{0})
	f.Add(uint16(0x100), []byte("rix"))
	f.Add(uint16(0x2000), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint16(0x3c8), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, at uint16, data []byte) {
		h, root := fuzzHeap(t)
		for _, path := range fuzzPaths {
			h.p.Eval(root, path)
		}
		used := h.next - h.f.base
		off := uint64(at) % used
		copy(h.f.data[off:min(used, off+uint64(len(data)))], data)
		for _, path := range fuzzPaths {
			sameEval(t, h.p, root, path, fmt.Sprintf("%d bytes at %#x", len(data), off))
		}
	})
}

// TestFuzzHeapReads: the fuzz heap, undamaged, reads as built, mostly in
// the batch's fast paths (few reads per level).
func TestFuzzHeapReads(t *testing.T) {
	h, root := fuzzHeap(t)
	cm := &countingMemory{r: h.f}
	h.p.m = mem{cm}
	for _, tc := range []struct {
		path string
		want string
	}{
		{"[0][*].rid", "[rid-0 rid-1 rid-2 rid-3 rid-4 rid-5 rid-6 rid-7]"},
		{"[0][*].kind", "[plain plain plain plain plain plain plain plain]"},
		{"[1][*].s", "[s-0 s-1 s-2 s-3 s-4 s-5 s-6 s-7]"},
		{"[1][*].n", "[0 2 4 6 8 10 12 14]"},
		{"[2][*]", "[k0 k1 k2 k3 k4 k5 k6 k7]"},
		{"[3][*].f8", "[8 18 28 38 48 58 68 78]"},
	} {
		for round := 0; round < 2; round++ {
			cm.n = 0
			v, err := h.p.Eval(root, tc.path)
			if got := fmt.Sprint(v); err != nil || got != tc.want {
				t.Errorf("Eval(%s) = %s, %v; want %s", tc.path, got, err, tc.want)
			}
			steps, _ := parsePath(tc.path)
			if most := 3 * (len(steps) + 1); round == 1 && cm.n > most {
				t.Errorf("Eval(%s), caches warm: %d reads, want at most %d", tc.path, cm.n, most)
			}
		}
	}
}
