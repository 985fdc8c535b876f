package pyproc

import (
	"fmt"
	"math"
)

// Value is what Eval returns:
//   - nil for None
//   - bool
//   - int64, or uint64 for an int above MaxInt64 that fits 64 bits
//   - float64
//   - string (any compact str: ASCII, latin-1, UCS-2, UCS-4)
//   - []Value for a list or tuple, and for each [*]
//   - Object for anything else (an instance, a dict, …): Eval from its Addr.
type Value any

// Object is a value Eval does not convert.
type Object struct {
	Addr uint64
	Type string // tp_name
}

// More Py_TPFLAGS_* (docs/design.md): managed dicts (3.11+), inline values
// (3.13+), and the subclass bits that tell an int or list subclass at once.
const (
	flagInlineValues  = 1 << 2
	flagManagedDict   = 1 << 4
	flagLongSubclass  = 1 << 24
	flagListSubclass  = 1 << 25
	flagTupleSubclass = 1 << 26
)

const (
	// maxItems bounds a list or tuple Eval reads ([*], conversion).
	maxItems = 4096
	// maxVisits bounds the objects one Eval touches (nested [*]).
	maxVisits = 1 << 16
	// maxNest bounds the lists in lists a value converts.
	maxNest = 32
	// headRead is read optimistically at a value: the header of an int,
	// float or str and up to ~80 bytes of a str's text in one syscall.
	headRead = 0x80
	// pyLongShift: digits are 30 bits in every build we read (docs/design.md).
	pyLongShift = 30
	// pageSize is the smallest page size: mappings start and end at
	// multiples of it.
	pageSize = 0x1000
)

// objBlock reads headRead bytes at obj, or, when the object sits right
// before an unmapped page, the bytes up to that page (at least the 16-byte
// object header): an object does not run into a page that is not there.
func (p *Process) objBlock(obj uint64) (block, error) {
	if !validObj(obj) {
		return block{}, fmt.Errorf("bad object pointer %#x", obj)
	}
	b, err := p.m.block(obj, headRead)
	if err != nil {
		b, err = p.m.block(obj, int(max(0x10, min(headRead, pageSize-obj%pageSize))))
	}
	if err == nil {
		err = checkHead(b)
	}
	return b, err
}

// checkHead checks the type pointer in an object's first bytes.
func checkHead(b block) error {
	if !validObj(b.u64(8)) {
		return fmt.Errorf("object at %#x: bad type pointer %#x", b.addr, b.u64(8))
	}
	return nil
}

// value converts obj. Lists and tuples convert item by item (bounded);
// objects of other types come back as Object.
func (e *evaluator) value(obj uint64, where string) (Value, error) {
	p := e.p
	if obj == p.types.none && obj != 0 {
		return nil, nil
	}
	if err := e.visit(where); err != nil {
		return nil, err
	}
	b, err := p.objBlock(obj)
	if err != nil {
		return nil, e.fail(where, "", err)
	}
	return e.valueFrom(b, where)
}

// valueFrom is value once the object's first bytes are read (b).
func (e *evaluator) valueFrom(b block, where string) (Value, error) {
	p, obj := e.p, b.addr
	t := b.u64(8)
	switch t {
	case p.types.str:
		return e.str(b, where)
	case p.types.long:
		return e.int(b, where)
	case p.types.boolean:
		v, err := e.int(b, where)
		if err != nil {
			return nil, err
		}
		return v != int64(0), nil
	case p.types.float:
		b, err := p.grow(b, p.layout.FloatValue+8)
		if err != nil {
			return nil, e.fail(where, "float", err)
		}
		return math.Float64frombits(b.u64(p.layout.FloatValue)), nil
	case p.types.list, p.types.tuple:
		return e.list(obj, where)
	}
	ti, err := e.typeInfo(t)
	if err != nil {
		return nil, e.fail(where, "", err)
	}
	switch {
	case p.types.none == 0 && e.typeName(ti) == "NoneType":
		return nil, nil
	case ti.flags&flagUnicodeSubclass != 0:
		return e.str(b, where)
	case ti.flags&flagLongSubclass != 0: // IntEnum, IntFlag
		return e.int(b, where)
	case ti.flags&(flagListSubclass|flagTupleSubclass) != 0: // namedtuple
		return e.list(obj, where)
	}
	return Object{Addr: obj, Type: e.typeName(ti)}, nil
}

func (e *evaluator) str(b block, where string) (Value, error) {
	p := e.p
	h, err := p.parseStrHead(b.addr, b)
	if err != nil {
		return nil, e.fail(where, "str", err)
	}
	n := uint64(h.length) * uint64(h.kind)
	if end := h.dataAddr - b.addr + n; end <= uint64(len(b.b)) {
		return decodeKind(b.b[h.dataAddr-b.addr:end], h.kind), nil
	}
	raw, err := p.m.bytes(h.dataAddr, int(n))
	if err != nil {
		return nil, e.fail(where, "str", err)
	}
	return decodeKind(raw, h.kind), nil
}

// int reads a PyLong of up to 64 bits. The digit count and sign sit in
// ob_size (3.10, 3.11: negative size for negative ints) or in lv_tag
// (3.12+: sign = tag&3 with 0 positive, 1 zero, 2 negative; count = tag>>3).
func (e *evaluator) int(b block, where string) (Value, error) {
	l := &e.p.layout
	raw := b.u64(l.LongSize)
	var n uint64
	neg := false
	if l.LongTagged {
		switch raw & 3 {
		case 1:
			return int64(0), nil
		case 2:
			neg = true
		case 3:
			return nil, e.fail(where, "int", fmt.Errorf("bad lv_tag %#x", raw))
		}
		n = raw >> 3
	} else {
		size := int64(raw)
		neg = size < 0
		n = uint64(max(size, -size))
	}
	if n > 3 {
		return nil, e.fail(where, "int", fmt.Errorf("int of %d digits is wider than 64 bits", n))
	}
	b, err := e.p.grow(b, l.LongDigits+4*n)
	if err != nil {
		return nil, e.fail(where, "int", err)
	}
	var mag uint64
	for i := int(n) - 1; i >= 0; i-- {
		d := uint64(b.u32(l.LongDigits + 4*uint64(i)))
		if d>>pyLongShift != 0 || mag>>(64-pyLongShift) != 0 {
			return nil, e.fail(where, "int", fmt.Errorf("int wider than 64 bits (or bad digit %#x)", d))
		}
		mag = mag<<pyLongShift | d
	}
	switch {
	case !neg && mag <= math.MaxInt64:
		return int64(mag), nil
	case !neg:
		return mag, nil
	case mag <= 1<<63:
		return int64(-mag), nil // wraps to MinInt64 for 2^63
	}
	return nil, e.fail(where, "int", fmt.Errorf("int below -2^63"))
}

// list converts every item of a list or tuple. Lists in lists convert
// down to maxNest levels: a list that holds itself would otherwise go as
// deep as maxVisits, with a path that grows at each level.
func (e *evaluator) list(obj uint64, where string) (Value, error) {
	if e.nest >= maxNest {
		return nil, e.fail(where, "", fmt.Errorf("lists nested more than %d deep", maxNest))
	}
	items, _, err := e.items(obj, where)
	if err != nil {
		return nil, err
	}
	e.nest++
	defer func() { e.nest-- }()
	out := make([]Value, len(items))
	for i, it := range items {
		if out[i], err = e.value(it, fmt.Sprintf("%s[%d]", where, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// items returns a list's or tuple's item pointers (at most maxItems) and the
// type name. A list's item array is read after its size: the target may
// grow or shrink it meanwhile, so every item pointer is checked.
func (e *evaluator) items(obj uint64, where string) ([]uint64, string, error) {
	p, l := e.p, &e.p.layout
	// A list's header, type included, in one read.
	if !validObj(obj) {
		return nil, "", e.fail(where, "", fmt.Errorf("bad object pointer %#x", obj))
	}
	h, err := p.m.block(obj, int(max(l.ListItems, l.TupleSize))+8)
	if err != nil {
		return nil, "", e.fail(where, "", err)
	}
	t := h.u64(8)
	// The exact built-ins need no look at the type object.
	name := "list"
	isList, isTuple := t == p.types.list, t == p.types.tuple
	if isTuple {
		name = "tuple"
	}
	isDict := t == p.types.dict
	if !isList && !isTuple && !isDict {
		ti, err := e.typeInfo(t)
		if err != nil {
			return nil, "", e.fail(where, "", err)
		}
		isList, isTuple, name = ti.flags&flagListSubclass != 0, ti.flags&flagTupleSubclass != 0, e.typeName(ti)
		isDict = ti.flags&flagDictSubclass != 0
	}
	if isDict {
		// Iterating a dict gives its keys, in insertion order.
		if name == "list" {
			name = "dict"
		}
		keys, err := p.dictKeyObjs(obj, maxItems)
		if err != nil {
			return nil, name, e.fail(where, name, err)
		}
		return keys, name, nil
	}
	if isTuple {
		items, err := p.readTuple(obj, maxItems)
		if err != nil {
			return nil, name, e.fail(where, name, err)
		}
		return items, name, nil
	}
	if !isList {
		return nil, name, e.fail(where, name, fmt.Errorf("not a list, tuple or dict"))
	}
	n, arr := h.u64(l.ListSize), h.u64(l.ListItems)
	if n > maxItems {
		return nil, name, e.fail(where, name, fmt.Errorf("%d items (limit %d)", int64(n), maxItems))
	}
	if n == 0 {
		return nil, name, nil
	}
	raw, err := p.m.block(arr, int(8*n))
	if err != nil {
		return nil, name, e.fail(where, name, fmt.Errorf("item array: %w", err))
	}
	out := make([]uint64, n)
	for i := range out {
		if out[i] = raw.u64(8 * uint64(i)); !validObj(out[i]) {
			return nil, name, e.fail(where, name, fmt.Errorf("bad item %d (%#x): list changed while read?", i, out[i]))
		}
	}
	return out, name, nil
}
