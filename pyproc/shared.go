package pyproc

import (
	"fmt"
	"strings"
)

// dictAttr looks name up in the dict of an instance of ti. A split dict
// (3.10 instances, and 3.11+ instances whose __dict__ was asked for) shares
// its keys with the class, so the entry index found once serves every
// instance of the class.
func (e *evaluator) dictAttr(ti *typeInfo, d uint64, name, where string) (uint64, bool, error) {
	p, l := e.p, &e.p.layout
	hdr, err := p.m.block(d, int(l.DictValues)+8)
	if err != nil {
		return 0, false, fmt.Errorf("instance dict: %w", err)
	}
	if t := hdr.u64(8); t != p.types.dict {
		if err := p.checkSubtype(t, flagDictSubclass, "dict"); err != nil {
			return 0, false, fmt.Errorf("instance dict: %w", err)
		}
	}
	return e.lookupKeys(ti, hdr.u64(l.DictKeys), hdr.u64(l.DictValues), name, where)
}

// lookupKeys finds name in a keys table; for a split table (values != 0)
// the value comes from values. 3.13's values carry their capacity: an
// entry added to the shared keys after these values were made has no slot.
// In ti's shared keys the entry index is a memo kept with the type; in
// other keys it is remembered for this Eval.
func (e *evaluator) lookupKeys(ti *typeInfo, keys, values uint64, name, where string) (uint64, bool, error) {
	p, l := e.p, &e.p.layout
	if keys == ti.cachedKeys && keys != 0 && values != 0 {
		sm, err := e.sharedIndex(ti, name, where)
		if err != nil || !sm.found {
			return 0, false, err
		}
		return e.sharedValue(values, sm.ix)
	}
	sk := sharedKey{keys, name}
	if ix, ok := e.shared[sk]; ok && values != 0 {
		return e.sharedValue(values, ix)
	}
	v, err := p.openKeys(keys, values, "attributes of "+where)
	if err != nil {
		return 0, false, err
	}
	if values != 0 && l.DictValuesArray != 0 {
		cb, err := e.read(values, 1)
		if err != nil {
			return 0, false, err
		}
		if cb.u8(0) == 0 {
			return 0, false, nil // no slots at all
		}
		v.valuesCap = uint64(cb.u8(0))
	}
	val, ix, ok, err := p.dictLookupIx(v, name)
	switch {
	case err != nil || !ok:
	case v.values != 0:
		e.shared[sk] = ix
	case p.hashOK > 0:
		e.rememberDictKey(ti, v, name, ix)
	}
	return val, ok, err
}

// dictKeyMemo is the str the instance dicts of a type hold a name as (an
// attribute name is interned: the same str in every instance's dict), the
// other strs a probe for the name met before it in the dict it was found in
// (other names, the same in every instance made alike), and how many bytes
// of a keys object reach its entry there: a batch reads that much of each
// instance's keys and probes them reading no str (probeKnown). Its proof
// is the bytes of those strs.
type dictKeyMemo struct {
	memo
	key    uint64
	others []uint64
	n      int
}

// rememberDictKey records the str at entry ix of v (a combined dict of an
// instance of ti) as the one name is held by, and the strs a probe meets
// before it, if they read as dictProbe would take them.
func (e *evaluator) rememberDictKey(ti *typeInfo, v *dictView, name string, ix int64) {
	p := e.p
	n := v.entries - v.keys + uint64(ix+1)*v.entrySize
	if n > maxTableRead || len(ti.dictKeys) >= maxSharedNames {
		return
	}
	hash := p.strHash(name)
	dk := &dictKeyMemo{n: int(n)}
	ok := false
	dk.memo = e.derive(func() {
		var path []uint64
		if path, ok = p.probePath(v, hash, ix); !ok {
			return
		}
		dk.key, dk.others = path[len(path)-1], path[:len(path)-1]
		for i, k := range path {
			b, err := p.m.block(k, headRead)
			h, herr := p.parseStrHead(k, b)
			is := err == nil && herr == nil && p.strIs(b, name) && (h.hash == -1 || h.hash == hash)
			if is != (i == len(path)-1) || err != nil {
				ok = false
				return
			}
		}
	})
	if ok && dk.proof != nil {
		ti.dictKeys[name] = dk
	}
}

// sharedMemo says where name sits in a type's shared keys, or that it is
// not there.
type sharedMemo struct {
	memo
	ix    int64
	found bool
}

// sharedIndex finds name in ti's shared keys, by a memo checked in this
// Eval or a fresh lookup.
func (e *evaluator) sharedIndex(ti *typeInfo, name, where string) (*sharedMemo, error) {
	if sm := ti.shared[name]; sm != nil && e.usable(&sm.memo) && e.confirm(&sm.memo) {
		return sm, nil
	}
	sm := &sharedMemo{}
	var err error
	sm.memo = e.derive(func() { sm.ix, sm.found, err = e.p.keyIndex(ti.cachedKeys, "attributes of "+where, name) })
	if err != nil {
		delete(ti.shared, name)
		return nil, err
	}
	if _, ok := ti.shared[name]; ok || len(ti.shared) < maxSharedNames {
		ti.shared[name] = sm
	}
	return sm, nil
}

// sharedValue reads slot ix of a values array (one read; on 3.13 the
// capacity byte comes with it).
func (e *evaluator) sharedValue(values uint64, ix int64) (uint64, bool, error) {
	l := &e.p.layout
	off := l.DictValuesArray + 8*uint64(ix)
	b, err := e.read(values, int(off+8))
	if err != nil {
		return 0, false, err
	}
	if l.DictValuesArray != 0 && uint64(ix) >= uint64(b.u8(0)) {
		return 0, false, nil
	}
	v := b.u64(off)
	if v != 0 && !validObj(v) {
		return 0, false, fmt.Errorf("bad value pointer %#x", v)
	}
	return v, v != 0, nil
}

// attrNames lists what obj.name could have meant: the instance's attributes
// and the class's non-dunder names. Only for error messages.
func (e *evaluator) attrNames(obj uint64, ti *typeInfo) []string {
	p := e.p
	var out []string
	dict, values, err := e.instanceStore(obj, ti)
	switch {
	case err != nil:
	case dict != 0:
		out, _ = p.dictKeys(dict, maxNearKeys)
	case values != 0:
		if v, err := p.openKeys(ti.cachedKeys, values, "shared keys"); err == nil {
			if p.layout.DictValuesArray != 0 {
				c, _ := p.m.u8(values)
				v.valuesCap = max(uint64(c), 1) // 0 would mean "unknown"
			}
			out, _ = p.viewKeys(v, maxNearKeys)
		}
	}
	for _, d := range e.classDicts(ti) {
		keys, _ := p.dictKeys(d, maxNearKeys)
		for _, k := range keys {
			if !strings.HasPrefix(k, "__") {
				out = append(out, k)
			}
		}
	}
	return out
}

// read returns n bytes at addr from the last object header read (e.hint)
// when it covers them, else reads them.
func (e *evaluator) read(addr uint64, n int) (block, error) {
	h := e.hint
	if addr >= h.addr && addr-h.addr+uint64(n) <= uint64(len(h.b)) {
		return block{addr, h.b[addr-h.addr : addr-h.addr+uint64(n)]}, nil
	}
	return e.p.m.block(addr, n)
}

func (e *evaluator) word(addr uint64) (uint64, error) {
	b, err := e.read(addr, 8)
	return b.u64(0), err
}

// grow rereads b when fewer than n bytes of it are known.
func (p *Process) grow(b block, n uint64) (block, error) {
	if n <= uint64(len(b.b)) {
		return b, nil
	}
	return p.m.block(b.addr, int(n))
}

// slot reads a __slots__ member: PyMemberDescrObject.d_member → PyMemberDef
// {name, type, offset}; the object pointer sits at obj+offset. classAttr
// has read the PyMemberDef, unless that failed: then it is read again here
// for the error.
func (e *evaluator) slot(obj uint64, ti *typeInfo, ca classAttr, name, where string) (uint64, error) {
	p := e.p
	if ca.slotType == 0 {
		typ, off, _, err := e.memberDef(ti, ca.member, name)
		if err != nil {
			return 0, e.fail(where, e.typeName(ti), err)
		}
		ca.slotType, ca.slotOff = typ, off
	}
	v, err := p.m.optPtr(obj + uint64(ca.slotOff))
	if err != nil {
		return 0, e.fail(where, e.typeName(ti), err)
	}
	return e.slotValue(ti, ca, v, name, where)
}

// slotValue is what a slot holding v reads as.
func (e *evaluator) slotValue(ti *typeInfo, ca classAttr, v uint64, name, where string) (uint64, error) {
	switch {
	case v == 0 && ca.slotType == tObject && e.p.types.none != 0:
		return e.p.types.none, nil
	case v == 0:
		return 0, e.fail(where, e.typeName(ti), fmt.Errorf("slot %q is not set", name))
	}
	return v, nil
}

// memberDef reads a member descriptor's PyMemberDef (at def): the slot's
// type and offset.
func (e *evaluator) memberDef(ti *typeInfo, descr uint64, name string) (typ int32, off int64, def uint64, err error) {
	p, l := e.p, &e.p.layout
	def, err = p.m.ptr(descr + l.MemberDescrDef)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("member descriptor: %w", err)
	}
	b, err := p.m.block(def, int(l.MemberDefOffset)+8)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("member descriptor: %w", err)
	}
	typ, off = int32(b.u32(l.MemberDefType)), int64(b.u64(l.MemberDefOffset))
	if typ != tObject && typ != tObjectEx {
		return 0, 0, 0, fmt.Errorf("member %q holds a C value (type code %d), not an object", name, typ)
	}
	if off < 0x10 || off+8 > ti.basicsize {
		return 0, 0, 0, fmt.Errorf("slot %q at offset %d outside the object (%d bytes)", name, off, ti.basicsize)
	}
	return typ, off, def, nil
}
