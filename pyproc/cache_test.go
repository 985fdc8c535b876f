package pyproc

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestCacheSeesChanges changes, between Evals, each thing the type cache
// keeps across them — as CPython would, and as a forged process could —
// and checks that Eval reads what the memory now says: what a reading with
// no cache (EvalItemByItem) gives.
func TestCacheSeesChanges(t *testing.T) {
	h := newFakeHeap(t)
	l := &h.p.layout
	kind := h.str("plain")
	req := h.class("Req", []string{"a", "rid"}, map[string]uint64{"kind": kind})
	other := h.class("Other", []string{"rid", "a"}, nil)
	var reqs []uint64
	for i := 0; i < 3; i++ {
		reqs = append(reqs, h.instance(req, h.int(uint64(i)), h.str(fmt.Sprintf("r%d", i))))
	}
	batch := h.list(reqs...)
	keys, _ := h.p.m.u64(req + l.TypeCachedKeys)
	check := func(what, path string, want any) {
		t.Helper()
		v, err := sameEval(t, h.p, batch, path, what)
		if msg, ok := want.(string); ok && strings.HasPrefix(msg, "error: ") {
			if err == nil || !strings.Contains(err.Error(), msg[7:]) {
				t.Errorf("%s: Eval(%s) = %v, %v; want %s", what, path, v, err, msg)
			}
		} else if err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s: Eval(%s) = %v, %v; want %v", what, path, v, err, want)
		}
	}
	rids := []Value{"r0", "r1", "r2"}
	check("first read", "[*].rid", rids)
	check("caches warm", "[*].rid", rids)
	check("class attribute", "[*].kind", []Value{"plain", "plain", "plain"})

	// The shared keys rewritten in place: rid now names entry 0.
	k0, _ := h.p.m.u64(h.entryKey(keys, 0))
	k1, _ := h.p.m.u64(h.entryKey(keys, 1))
	h.put(h.entryKey(keys, 0), k1)
	h.put(h.entryKey(keys, 1), k0)
	check("keys rewritten", "[*].rid", []Value{int64(0), int64(1), int64(2)})
	h.put(h.entryKey(keys, 0), k0)
	h.put(h.entryKey(keys, 1), k1)
	check("keys restored", "[*].rid", rids)

	// The key str rewritten in place.
	h.rewriteStr(k1, "rix")
	check("key str rewritten", "[*].rid", `error: [0].rid: on a Req: no attribute "rid"; near: rix`)
	h.rewriteStr(k1, "rid")
	check("key str restored", "[*].rid", rids)

	// The type's shared keys replaced by others, where rid comes first.
	otherKeys, _ := h.p.m.u64(other + l.TypeCachedKeys)
	h.put(req+l.TypeCachedKeys, otherKeys)
	check("cached keys replaced", "[*].rid", []Value{int64(0), int64(1), int64(2)})
	h.put(req+l.TypeCachedKeys, keys)
	check("cached keys restored", "[*].rid", rids)

	// One instance's class changed to one with other shared keys.
	h.put(reqs[1]+8, other)
	check("__class__ assigned", "[*].rid", []Value{"r0", int64(1), "r2"})
	h.put(reqs[1]+8, req)

	// A class attribute assigned (CPython would also reset
	// tp_version_tag; a forged process need not).
	cdict, _ := h.p.m.u64(req + l.TypeDict)
	ck, _ := h.p.m.u64(cdict + l.DictKeys)
	h.put(h.entryKey(ck, 0)+8, h.str("changed"))
	check("class attribute assigned", "[*].kind", []Value{"changed", "changed", "changed"})
	check("class attribute, caches warm", "[*].kind", []Value{"changed", "changed", "changed"})
	kk, _ := h.p.m.u64(h.entryKey(ck, 0))
	h.rewriteStr(kk, "kinx")
	check("class attribute's key rewritten", "[*].kind", `error: [0].kind: on a Req: no attribute "kind"; near: kinx`)
	h.rewriteStr(kk, "kind")
	other2 := h.dict([]string{"kind"}, []uint64{h.str("other dict")})
	h.put(req+l.TypeDict, other2)
	check("class dict replaced", "[*].kind", []Value{"other dict", "other dict", "other dict"})

	// The type made another: no managed dict any more.
	h.put(req+l.TypeFlags, flagHeapType)
	check("type's flags changed", "[*].rid", `error: [0].rid: on a Req: no attribute "rid"`)
	h.put(req+l.TypeFlags, flagHeapType|flagManagedDict)
	check("type's flags restored", "[*].rid", rids)

	// The list changed length between two Evals.
	h.put(batch+l.ListSize, 2)
	check("list shrunk", "[*].rid", rids[:2])
}

// TestCombinedDicts: instances with dicts of their own (more attributes
// than shared keys hold) read in batches by the strs their dicts hold the
// names as, and what a forged str or reordered dict does to that.
func TestCombinedDicts(t *testing.T) {
	h := newHashedHeap(t)
	big := h.class("Big", nil, nil)
	names := []string{"rid", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8"}
	var objs []uint64
	for i := 0; i < 16; i++ {
		var vals []uint64
		for j := range names {
			vals = append(vals, h.int(uint64(100*i+j)))
		}
		objs = append(objs, h.dictInstance(big, names, vals))
	}
	batch := h.list(objs...)
	want := func(j int) []Value {
		var out []Value
		for i := range objs {
			out = append(out, int64(100*i+j))
		}
		return out
	}
	cm := &countingMemory{r: h.f}
	h.p.m = mem{cm}
	check := func(what, path string, want any) {
		t.Helper()
		v, err := sameEval(t, h.p, batch, path, what)
		if w, ok := want.([]Value); ok && (err != nil || !reflect.DeepEqual(v, w)) {
			t.Errorf("%s: Eval(%s) = %v, %v; want %v", what, path, v, err, w)
		}
	}
	// A name whose probe meets another name first, in every instance.
	l := &h.p.layout
	d0, _ := h.p.m.u64(objs[0] - 0x18)
	keys0, _ := h.p.m.u64(d0 + l.DictKeys)
	v0, err := h.p.openKeys(keys0, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	collide := -1
	for j, n := range names {
		if path, ok := h.p.probePath(v0, h.p.strHash(n), int64(j)); ok && len(path) > 1 && collide < 0 {
			collide = j
		}
	}
	if collide < 0 {
		t.Fatal("no name's probe meets another name: change the names")
	}
	for j, n := range names {
		check("first read", "[*]."+n, want(j))
	}
	for j, n := range names {
		check("caches warm", "[*]."+n, want(j))
		cm.n = 0
		h.p.Eval(batch, "[*]."+n)
		if cm.n > 8 { // list, items, hints, dicts (and checks), keys, ints, the type
			t.Errorf("[*].%s, caches warm: %d reads", n, cm.n)
		}
	}

	// The name met first rewritten to read as the one probed for: the
	// probe must now stop there, as a fresh lookup does.
	name := names[collide]
	path, _ := h.p.probePath(v0, h.p.strHash(name), int64(collide))
	var first int
	for j := range names {
		if k, _ := h.p.m.u64(h.entryKey(keys0, j)); k == path[0] {
			first = j
		}
	}
	orig := names[first]
	h.rewriteStr(path[0], name[:min(len(name), len(orig))]+orig[min(len(name), len(orig)):])
	check("other key rewritten", "[*]."+name, nil)
	h.rewriteStr(path[0], orig)
	check("other key restored", "[*]."+name, want(collide))

	// The name's own str rewritten.
	key := path[len(path)-1]
	h.rewriteStr(key, "x"+name[1:])
	check("key rewritten", "[*]."+name, nil)
	h.rewriteStr(key, name)

	// One instance's dict in another order.
	rev := slices.Clone(names)
	slices.Reverse(rev)
	var vals []uint64
	for j := range rev {
		vals = append(vals, h.int(uint64(len(rev)-1-j)))
	}
	h.put(objs[3]-0x18, h.dict(rev, vals))
	w := want(collide)
	w[3] = int64(collide)
	check("one dict reordered", "[*]."+name, w)

	// One instance's dict holding a name twice: first as a str of its own
	// (not the interned one), which a probe meets first.
	last := names[len(names)-1]
	d := h.dict(nil, nil)
	h.put(d+l.DictKeys, h.keysOf(false, []string{last, last}, []uint64{h.str(last), h.interned[last]},
		[]uint64{h.int(7), h.int(8)}))
	h.put(objs[5]-0x18, d)
	w = want(len(names) - 1)
	w[3], w[5] = int64(len(names)-1), int64(7) // objs[3]: reordered above
	check("a dict with a name twice", "[*]."+last, w)
}

// TestCacheBound: a process can make any number of types; the cache keeps
// at most maxCachedTypes of them, and reads stay right past the bound.
func TestCacheBound(t *testing.T) {
	h := newFakeHeapOf(t, 4<<20)
	var objs []uint64
	var want []Value
	for i := 0; i < maxCachedTypes+100; i++ {
		name := fmt.Sprintf("T%d", i)
		cls := h.typeObject(name, 0x10, flagHeapType)
		objs = append(objs, h.object(cls))
		want = append(want, Object{Addr: objs[i], Type: name})
	}
	batch := h.list(objs...)
	for round := 0; round < 2; round++ {
		v, err := sameEval(t, h.p, batch, "", "many types")
		if err != nil || !reflect.DeepEqual(v, Value(want)) {
			t.Fatalf("round %d: read %d types wrong: %.200v, %v", round, len(objs), v, err)
		}
		if n := len(h.p.cache.types); n > maxCachedTypes {
			t.Errorf("round %d: %d types cached, bound %d", round, n, maxCachedTypes)
		}
	}
}
