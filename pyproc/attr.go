package pyproc

import (
	"fmt"
	"strings"
)

// PyMemberDef types a __slots__ slot can have: T_OBJECT (None when unset)
// and T_OBJECT_EX (AttributeError when unset).
const (
	tObject   = 6
	tObjectEx = 16
)

// typeInfo is what Eval needs of a type (kept across Evals: typecache.go).
type typeInfo struct {
	addr       uint64
	raw        block // the type object's first bytes (through ht_cached_keys when it has them)
	flags      uint64
	basicsize  int64
	dictoffset int64
	cachedKeys uint64 // ht_cached_keys of a heap type: its instances' shared keys
	gen        uint64 // the Eval that last checked this against the type object
	name       string // read when a message or an Object needs it
	// shared: where names sit in cachedKeys, for every instance whose
	// attributes use them (values, or a split dict on those keys); attrs:
	// what names are on the class.
	shared   map[string]*sharedMemo
	attrs    map[string]*classMemo
	dictKeys map[string]*dictKeyMemo // names in instances' own (combined) dicts
}

// classAttr is a name found on the type (along its MRO).
type classAttr struct {
	value    uint64 // a plain class attribute: used when the instance has none
	member   uint64 // a __slots__ member descriptor: read the slot
	computed string // a property or getset: only Python code can produce it
	// slotType and slotOff are the member's PyMemberDef, once read.
	slotType int32
	slotOff  int64
}

func (e *evaluator) typeName(ti *typeInfo) string {
	if ti.name == "" {
		ti.name = e.p.typeName(ti.addr)
	}
	return ti.name
}

// classDicts are the tp_dicts along a type's MRO. Static built-in types are
// skipped, as getattr in find.go does: no user attribute lives there. The
// MRO and each class's flags and dict are read afresh, so that a class
// lookup's memo holds them in its proof.
func (e *evaluator) classDicts(ti *typeInfo) []uint64 {
	p, l := e.p, &e.p.layout
	mro := []uint64{ti.addr}
	tup, err := p.m.u64(ti.addr + l.TypeMro)
	if err != nil {
		tup = ti.raw.u64(l.TypeMro)
	}
	if tup != 0 {
		if mro, err = p.readTuple(tup, maxMro); err != nil {
			return nil
		}
	}
	var out []uint64
	for _, c := range mro {
		if c == p.types.object {
			continue
		}
		b, err := p.m.block(c, int(l.TypeDict)+8)
		if err != nil || b.u64(l.TypeFlags)&flagHeapType == 0 {
			continue
		}
		if d := b.u64(l.TypeDict); validObj(d) {
			out = append(out, d)
		}
	}
	return out
}

// classMemo is what a name is on a class.
type classMemo struct {
	memo
	classAttr
}

// classAttr looks name up along ti's MRO, by a memo checked in this Eval
// or afresh.
func (e *evaluator) classAttr(ti *typeInfo, name string) (classAttr, error) {
	if cm := ti.attrs[name]; cm != nil && e.usable(&cm.memo) && e.confirm(&cm.memo) {
		return cm.classAttr, nil
	}
	cm := &classMemo{}
	var err error
	cm.memo = e.derive(func() { cm.classAttr, err = e.findClassAttr(ti, name) })
	if err != nil {
		delete(ti.attrs, name)
		return classAttr{}, err
	}
	if _, ok := ti.attrs[name]; ok || len(ti.attrs) < maxSharedNames {
		ti.attrs[name] = cm
	}
	return cm.classAttr, nil
}

func (e *evaluator) findClassAttr(ti *typeInfo, name string) (classAttr, error) {
	p := e.p
	var ca classAttr
	for _, d := range e.classDicts(ti) {
		v, ok, err := p.dictGet(d, name)
		if err != nil {
			return ca, fmt.Errorf("class dict: %w", err)
		}
		if !ok {
			continue
		}
		switch t, _ := p.typeOf(v); {
		case t == p.types.member && t != 0:
			ca.member = v
			if typ, off, _, err := e.memberDef(ti, v, name); err == nil {
				ca.slotType, ca.slotOff = typ, off
			}
		case t == p.types.property && t != 0, t == p.types.getset && t != 0:
			ca.computed = p.typeName(t)
		default:
			ca.value = v
		}
		break
	}
	return ca, nil
}

// attr resolves obj.name for plain instances: the instance's attributes,
// then the class's (__slots__ members read from the object; properties
// refused; plain class attributes as they are). Modules and classes go
// through find.go's getattr.
func (e *evaluator) attr(obj uint64, name, where string) (uint64, error) {
	if !validObj(obj) {
		return 0, e.fail(where, "", fmt.Errorf("bad object pointer %#x", obj))
	}
	hint, err := e.p.m.block(obj-hintBefore, hintLen)
	if err != nil {
		hint, err = e.p.m.block(obj, 0x10)
	}
	if err != nil {
		return 0, e.fail(where, "", err)
	}
	return e.attrWith(obj, hint, name, where)
}

// One read for the managed-dict words before the object, its header, a
// tp_dictoffset slot and (3.13) inline values right after a small object.
const hintBefore, hintLen = 0x20, 0x80

// attrWith is attr once the bytes around obj are read (hint).
func (e *evaluator) attrWith(obj uint64, hint block, name, where string) (uint64, error) {
	p := e.p
	e.hint = hint
	t, _ := e.word(obj + 8)
	ti, err := e.typeInfo(t)
	if err != nil {
		return 0, e.fail(where, "", err)
	}
	if t == p.types.module || ti.flags&flagTypeSubclass != 0 {
		owner := strings.TrimSuffix(where, "."+name)
		if owner == where {
			owner = "(start)"
		}
		v, err := p.getattr(obj, name, owner)
		if err != nil {
			return 0, e.fail(where, e.typeName(ti), err)
		}
		return v, nil
	}
	// The instance's own attributes first: Python looks for data
	// descriptors on the class before them, but a name that is a property or
	// slot is not also in the instance's dict in real code, and this order
	// spares the class lookup for the common case.
	dict, values, err := e.instanceStore(obj, ti)
	var v uint64
	var ok bool
	switch {
	case err != nil:
	case dict != 0:
		v, ok, err = e.dictAttr(ti, dict, name, where)
	case values != 0:
		v, ok, err = e.lookupKeys(ti, ti.cachedKeys, values, name, where)
	}
	if ok && err == nil {
		return v, nil
	}
	ca, cerr := e.classAttr(ti, name)
	switch {
	case cerr != nil:
		return 0, e.fail(where, e.typeName(ti), cerr)
	case ca.member != 0:
		return e.slot(obj, ti, ca, name, where)
	case ca.computed != "":
		return 0, e.fail(where, e.typeName(ti), fmt.Errorf("%q is a %s: computed by Python code, not readable from outside", name, ca.computed))
	case err != nil:
		return 0, e.fail(where, e.typeName(ti), err)
	case ca.value != 0:
		return ca.value, nil
	}
	return 0, e.fail(where, e.typeName(ti), nearErr(fmt.Sprintf("no attribute %q", name), name, e.attrNames(obj, ti)))
}

// instanceStore finds where an instance keeps its attributes: a dict, or
// (3.11+) a values array indexed through the class's shared keys, with no
// dict object at all until someone asks for __dict__.
//   - 3.10, and types with a fixed tp_dictoffset: the dict pointer there.
//   - 3.11 managed dict: values at obj-0x20, dict at obj-0x18.
//   - 3.12: one word at obj-0x18, values when bit 0 is set (stored minus 1).
//   - 3.13+: dict at obj-0x18; else inline values at obj+tp_basicsize
//     (PyDictValues{capacity, size, embedded, valid; values[]}), unless
//     'valid' was cleared when a dict took them over.
func (e *evaluator) instanceStore(obj uint64, ti *typeInfo) (dict, values uint64, err error) {
	l := &e.p.layout
	switch {
	case ti.flags&flagManagedDict != 0 && l.Version.Traits().ManagedDict != 0:
		pre, err := e.read(obj-0x20, 0x10)
		if err != nil {
			return 0, 0, fmt.Errorf("managed dict: %w", err)
		}
		switch w0, w1 := pre.u64(0), pre.u64(8); l.Version.Traits().ManagedDict {
		case 11:
			values, dict = w0, w1
		case 12:
			if w1&1 != 0 {
				values = w1 + 1
			} else {
				dict = w1
			}
		default:
			dict = w1
			if dict == 0 && ti.flags&flagInlineValues != 0 {
				values = obj + uint64(ti.basicsize)
				if h, err := e.read(values, 4); err != nil || h.u8(3) == 0 {
					values = 0 // unreadable, or no longer valid: no attributes there
				}
			}
		}
		if dict != 0 && !validObj(dict) || values != 0 && !validObj(values) {
			return 0, 0, fmt.Errorf("managed dict: bad dict %#x or values %#x", dict, values)
		}
		if values != 0 && ti.cachedKeys == 0 {
			return 0, 0, fmt.Errorf("split values but the class has no shared keys")
		}
		return dict, values, nil
	case ti.dictoffset > 0 && ti.dictoffset+8 <= ti.basicsize:
		d, err := e.word(obj + uint64(ti.dictoffset))
		if err == nil && d != 0 && !validObj(d) {
			err = fmt.Errorf("bad __dict__ pointer %#x", d)
		}
		return d, 0, err
	case ti.dictoffset != 0:
		return 0, 0, fmt.Errorf("instance dict at tp_dictoffset %d (a variable-size base such as int or tuple) is not supported", ti.dictoffset)
	}
	return 0, 0, nil // no __dict__: only slots and class attributes
}
