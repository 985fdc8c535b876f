package pyproc

import (
	"fmt"
	"reflect"
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
		v, err := h.p.Eval(batch, path)
		old, oldErr := h.p.EvalItemByItem(batch, path)
		if !reflect.DeepEqual(v, old) || fmt.Sprint(err) != fmt.Sprint(oldErr) {
			t.Errorf("%s: Eval(%s) = %v, %v; item by item %v, %v", what, path, v, err, old, oldErr)
		}
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
	k0, _ := h.p.m.u64(entryKey(keys, 0))
	k1, _ := h.p.m.u64(entryKey(keys, 1))
	h.put(entryKey(keys, 0), k1)
	h.put(entryKey(keys, 1), k0)
	check("keys rewritten", "[*].rid", []Value{int64(0), int64(1), int64(2)})
	h.put(entryKey(keys, 0), k0)
	h.put(entryKey(keys, 1), k1)
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
	h.put(entryKey(ck, 0)+8, h.str("changed"))
	check("class attribute assigned", "[*].kind", []Value{"changed", "changed", "changed"})
	check("class attribute, caches warm", "[*].kind", []Value{"changed", "changed", "changed"})
	kk, _ := h.p.m.u64(entryKey(ck, 0))
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
