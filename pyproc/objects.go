package pyproc

import (
	"bytes"
	"fmt"
)

// Py_TPFLAGS_*: CPython marks subclasses of the core built-ins in tp_flags,
// so one read tells whether a type derives from str, dict or type.
const (
	flagHeapType        = 1 << 9
	flagUnicodeSubclass = 1 << 28
	flagDictSubclass    = 1 << 29
	flagTypeSubclass    = 1 << 31
)

// maxMro bounds a class's MRO tuple; real hierarchies are tens deep.
const maxMro = 256

func (p *Process) typeOf(obj uint64) (uint64, error) {
	if !validObj(obj) {
		return 0, fmt.Errorf("bad object pointer %#x", obj)
	}
	return p.m.ptr(obj + 8)
}

func (p *Process) typeFlags(t uint64) (uint64, error) {
	if !validObj(t) {
		return 0, fmt.Errorf("bad type pointer %#x", t)
	}
	return p.m.u64(t + p.layout.TypeFlags)
}

// typeName is tp_name (a C string), for messages; "?" when unreadable.
func (p *Process) typeName(t uint64) string {
	name, err := p.m.u64(t + p.layout.TypeName)
	if err != nil || !validAddr(name) {
		return "?"
	}
	// A short second try: the name may sit just before an unmapped page.
	b, err := p.m.bytes(name, 128)
	if err != nil {
		if b, err = p.m.bytes(name, 24); err != nil {
			return "?"
		}
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// checkSubtype accepts t when its tp_flags carry the subclass flag.
func (p *Process) checkSubtype(t, flag uint64, what string) error {
	f, err := p.typeFlags(t)
	if err != nil {
		return err
	}
	if f&flag == 0 {
		return fmt.Errorf("object of type %s where a %s was expected", p.typeName(t), what)
	}
	return nil
}

func (p *Process) isClass(obj uint64) bool {
	t, err := p.typeOf(obj)
	if err != nil {
		return false
	}
	if t == p.types.typ {
		return true
	}
	f, err := p.typeFlags(t)
	return err == nil && f&flagTypeSubclass != 0 // a metaclass such as ABCMeta
}

func (p *Process) isModule(obj uint64) bool {
	t, err := p.typeOf(obj)
	if err != nil {
		return false
	}
	if t == p.types.module {
		return true
	}
	mro, _ := p.mro(t)
	for _, c := range mro {
		if c == p.types.module {
			return true
		}
	}
	return false
}

// mro returns a type's __mro__ (itself first).
func (p *Process) mro(t uint64) ([]uint64, error) {
	tup, err := p.m.optPtr(t + p.layout.TypeMro)
	if err != nil {
		return nil, err
	}
	if tup == 0 {
		return []uint64{t}, nil // not yet readied
	}
	n, err := p.m.u64(tup + p.layout.TupleSize)
	if err != nil {
		return nil, err
	}
	if n == 0 || n > maxMro {
		return nil, fmt.Errorf("mro of %#x has %d entries", t, n)
	}
	raw, err := p.m.block(tup+p.layout.TupleItems, int(8*n))
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, n)
	for i := uint64(0); i < n; i++ {
		c := raw.u64(8 * i)
		if !validObj(c) {
			return nil, fmt.Errorf("mro of %#x: bad entry %#x", t, c)
		}
		out = append(out, c)
	}
	return out, nil
}

// instanceDict is the __dict__ of an object whose type keeps it at a fixed
// tp_dictoffset (C wrappers such as functools.lru_cache); 0 when none.
func (p *Process) instanceDict(obj, t uint64) uint64 {
	off, err := p.m.u64(t + 0x120) // tp_dictoffset
	if err != nil || int64(off) <= 0 || off > 0x1000 {
		return 0
	}
	d, err := p.m.optPtr(obj + off)
	if err != nil {
		return 0
	}
	return d
}
