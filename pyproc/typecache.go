package pyproc

import "fmt"

// typeCache keeps, across Evals, what was learned of each type: its layout
// fields, the entry index of attribute names in its instances' shared keys,
// and what names resolve to on the class. An entry is used only in an Eval
// that has compared it with the type object's current bytes (gen): a type
// freed and another made at its address, or a forged one, differs in those
// bytes and starts afresh.
type typeCache struct {
	gen   uint64 // the Eval under way
	types map[uint64]*typeInfo
}

// maxCachedTypes bounds the cache: a process can make any number of types,
// and Eval meets only those its paths lead to. Past it the cache starts empty.
const maxCachedTypes = 512

// maxSharedNames bounds the names remembered per type.
const maxSharedNames = 64

func newTypeCache() *typeCache { return &typeCache{types: map[uint64]*typeInfo{}} }

// flagValidVersionTag (3.10–3.12) toggles with tp_version_tag, which
// CPython resets on any change to the class: not a change of layout.
const flagValidVersionTag = 1 << 19

// sameLayout says whether a fresh read of the type agrees with the cached
// one in every field Eval decided anything by.
func (l *Layout) sameLayout(a, b *typeInfo) bool {
	return a.flags&^flagValidVersionTag == b.flags&^flagValidVersionTag &&
		a.basicsize == b.basicsize && a.dictoffset == b.dictoffset && a.cachedKeys == b.cachedKeys &&
		a.raw.u64(l.TypeName) == b.raw.u64(l.TypeName) && a.raw.u64(l.TypeDict) == b.raw.u64(l.TypeDict) &&
		a.raw.u64(l.TypeMro) == b.raw.u64(l.TypeMro)
}

// typeInfo returns what Eval knows of type t, reading the type object once
// per Eval: the first use in an Eval checks the cached entry against it.
func (e *evaluator) typeInfo(t uint64) (*typeInfo, error) {
	c := e.tc
	old := c.types[t]
	if old != nil && old.gen == c.gen {
		return old, nil
	}
	p, l := e.p, &e.p.layout
	if !validObj(t) {
		return nil, fmt.Errorf("bad type pointer %#x", t)
	}
	// A static type is shorter than a heap type: retry without ht_* fields.
	b, err := p.m.block(t, int(l.TypeCachedKeys)+8)
	if err != nil {
		if b, err = p.m.block(t, int(max(l.TypeDictOffset, l.TypeMro))+8); err != nil {
			return nil, err
		}
	}
	ti := &typeInfo{addr: t, raw: b, flags: b.u64(l.TypeFlags), basicsize: int64(b.u64(l.TypeBasicSize)),
		dictoffset: int64(b.u64(l.TypeDictOffset)), gen: c.gen,
		attrs: map[string]*classMemo{}, shared: map[string]*sharedMemo{}, dictKeys: map[string]*dictKeyMemo{}}
	if ti.basicsize < 0x10 || ti.basicsize > maxRead {
		delete(c.types, t)
		return nil, fmt.Errorf("type at %#x: bad tp_basicsize %d", t, ti.basicsize)
	}
	if ti.flags&flagHeapType != 0 && validObj(b.u64(l.TypeCachedKeys)) {
		ti.cachedKeys = b.u64(l.TypeCachedKeys)
	}
	if old != nil && l.sameLayout(old, ti) {
		// The same keys and class dict: what was found in them is worth
		// checking (memo.go).
		ti.shared, ti.attrs, ti.dictKeys = old.shared, old.attrs, old.dictKeys
	}
	if old == nil && len(c.types) >= maxCachedTypes {
		clear(c.types)
	}
	c.types[t] = ti
	return ti, nil
}
