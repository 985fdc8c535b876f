package pyproc

import (
	"encoding/binary"
	"testing"
)

// fakeHeap builds CPython 3.12 objects by hand in a fakeMemory, so that a
// test can forge or change exactly one field between two Evals.
type fakeHeap struct {
	t        *testing.T
	f        *fakeMemory
	p        *Process
	next     uint64
	interned map[string]uint64 // the strs keys hold, one per name as CPython interns them
}

// fakeTypeSize covers a heap type through ht_cached_keys (3.12).
const fakeTypeSize = 0x380

func newFakeHeap(t *testing.T) *fakeHeap { return newFakeHeapOf(t, 256<<10) }

// newFakeHeapOf is a fake heap of size bytes.
func newFakeHeapOf(t *testing.T, size int) *fakeHeap {
	l, err := tableLayout(Version{3, 12, 1})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMemory{base: fakeBase, data: make([]byte, size)}
	h := &fakeHeap{t: t, f: f, next: fakeBase + 0x1000, interned: map[string]uint64{}}
	// Scans, not hashed probes (newHashedHeap probes).
	h.p = &Process{m: mem{f}, layout: l, hashOK: -1}
	ty := &h.p.types
	for _, a := range []*uint64{&ty.typ, &ty.str, &ty.dict, &ty.list, &ty.tuple, &ty.long, &ty.object,
		&ty.module, &ty.member, &ty.property, &ty.getset, &ty.none, &ty.boolean, &ty.float} {
		*a = h.alloc(fakeTypeSize)
	}
	for _, a := range []uint64{ty.typ, ty.str, ty.dict, ty.list, ty.tuple, ty.long, ty.object} {
		h.put(a+8, ty.typ)
		h.put(a+l.TypeBasicSize, 0x10)
	}
	h.put(ty.str+l.TypeFlags, flagUnicodeSubclass)
	h.put(ty.dict+l.TypeFlags, flagDictSubclass)
	h.put(ty.list+l.TypeFlags, flagListSubclass)
	h.put(ty.tuple+l.TypeFlags, flagTupleSubclass)
	return h
}

// newHashedHeap is a fake heap whose lookups probe by hash, as they do in
// a process whose str hash pyproc computes: strs carry their hash.
func newHashedHeap(t *testing.T) *fakeHeap {
	h := newFakeHeap(t)
	h.p.hashOK, h.p.hashKey = 1, [2]uint64{0x0706050403020100, 0x0f0e0d0c0b0a0908}
	return h
}

func (h *fakeHeap) put(addr, v uint64) { h.f.put64(addr, v) }

func (h *fakeHeap) put8(addr uint64, v byte) { h.f.data[addr-h.f.base] = v }

// alloc returns n zeroed bytes, 16-aligned, with 0x20 bytes free before
// them (a managed dict's pre-header).
func (h *fakeHeap) alloc(n int) uint64 {
	a := h.next + 0x20
	h.next = (a + uint64(n) + 15) &^ 15
	if h.next-h.f.base > uint64(len(h.f.data)) {
		h.t.Fatal("fake heap full")
	}
	return a
}

// str is a compact ASCII str.
func (h *fakeHeap) str(s string) uint64 {
	l := &h.p.layout
	a := h.alloc(int(l.ASCIIData) + len(s) + 1)
	h.put(a, 1)
	h.put(a+8, h.p.types.str)
	h.put(a+l.UnicodeLength, uint64(len(s)))
	h.put(a+l.UnicodeHash, ^uint64(0)) // not yet computed
	if h.p.hashOK > 0 {
		h.put(a+l.UnicodeHash, uint64(h.p.strHash(s)))
	}
	binary.LittleEndian.PutUint32(h.f.data[a+l.UnicodeState-h.f.base:], 1<<2|1<<5|1<<6)
	copy(h.f.data[a+l.ASCIIData-h.f.base:], s)
	return a
}

// rewriteStr changes a str's text in place (same length).
func (h *fakeHeap) rewriteStr(a uint64, s string) {
	copy(h.f.data[a+h.p.layout.ASCIIData-h.f.base:], s)
}

// int is a small non-negative int (3.12 lv_tag).
func (h *fakeHeap) int(v uint64) uint64 {
	a := h.alloc(0x20)
	h.put(a, 1)
	h.put(a+8, h.p.types.long)
	h.put(a+h.p.layout.LongSize, 1<<3)
	h.put(a+h.p.layout.LongDigits, v)
	return a
}

func (h *fakeHeap) list(items ...uint64) uint64 {
	l := &h.p.layout
	a, arr := h.alloc(0x28), h.alloc(8*len(items)+8)
	h.put(a, 1)
	h.put(a+8, h.p.types.list)
	h.put(a+l.ListSize, uint64(len(items)))
	h.put(a+l.ListItems, arr)
	for i, it := range items {
		h.put(arr+8*uint64(i), it)
	}
	return a
}

func (h *fakeHeap) tuple(items ...uint64) uint64 {
	l := &h.p.layout
	a := h.alloc(int(l.TupleItems) + 8*len(items))
	h.put(a, 1)
	h.put(a+8, h.p.types.tuple)
	h.put(a+l.TupleSize, uint64(len(items)))
	for i, it := range items {
		h.put(a+l.TupleItems+8*uint64(i), it)
	}
	return a
}

// keys is a keys object of str keys (3.11+ layout) with its index table
// filled as CPython fills it, so that lookups probe by hash (hashed heaps)
// or scan. values: an entry's value (combined), or nil for split keys.
func (h *fakeHeap) keys(split bool, names []string, values []uint64) uint64 {
	strs := make([]uint64, len(names))
	for i, n := range names {
		if h.interned[n] == 0 {
			h.interned[n] = h.str(n)
		}
		strs[i] = h.interned[n]
	}
	return h.keysOf(split, names, strs, values)
}

// keysOf is keys with the strs the entries hold (names: their text).
func (h *fakeHeap) keysOf(split bool, names []string, strs, values []uint64) uint64 {
	log2 := uint64(3)
	for 3*len(names) > 2<<log2 { // at most two thirds full
		log2++
	}
	size := uint64(1) << log2
	a := h.alloc(int(0x20 + size + 16*uint64(len(names))))
	h.put8(a+8, byte(log2)) // dk_log2_size
	h.put8(a+9, byte(log2)) // dk_log2_index_bytes: one-byte indices
	kind := byte(1)
	if split {
		kind = kindSplit
	}
	h.put8(a+0xa, kind)
	h.put(a+0x18, uint64(len(names)))
	for i := uint64(0); i < size; i++ {
		h.put8(a+0x20+i, 0xff) // DKIX_EMPTY
	}
	for i, n := range names {
		hash := uint64(h.p.strHash(n))
		slot, perturb := hash&(size-1), hash
		for h.f.data[a+0x20+slot-h.f.base] != 0xff {
			perturb >>= 5
			slot = (slot*5 + perturb + 1) & (size - 1)
		}
		h.put8(a+0x20+slot, byte(i))
		h.put(h.entryKey(a, i), strs[i])
		if !split {
			h.put(h.entryKey(a, i)+8, values[i])
		}
	}
	return a
}

// entryKey is the address of entry i's key pointer in keys made by keys.
func (h *fakeHeap) entryKey(keys uint64, i int) uint64 {
	return keys + 0x20 + uint64(1)<<h.f.data[keys+9-h.f.base] + 16*uint64(i)
}

func (h *fakeHeap) dict(names []string, values []uint64) uint64 {
	l := &h.p.layout
	a := h.alloc(0x30)
	h.put(a, 1)
	h.put(a+8, h.p.types.dict)
	h.put(a+l.DictKeys, h.keys(false, names, values))
	return a
}

// class is a heap type whose instances keep their attributes in values
// over shared keys (names), with class attributes attrs (name, value).
func (h *fakeHeap) class(name string, shared []string, attrs map[string]uint64) uint64 {
	l := &h.p.layout
	a := h.typeObject(name, 0x10, flagHeapType|flagManagedDict)
	var names []string
	var vals []uint64
	for n, v := range attrs {
		names, vals = append(names, n), append(vals, v)
	}
	h.put(a+l.TypeDict, h.dict(names, vals))
	h.put(a+l.TypeMro, h.tuple(a, h.p.types.object))
	h.put(a+l.TypeCachedKeys, h.keys(true, shared, nil))
	return a
}

// instance is an instance of cls with values (3.12: the values pointer,
// minus 1, before the object).
func (h *fakeHeap) instance(cls uint64, values ...uint64) uint64 {
	a, arr := h.alloc(0x10), h.alloc(8*len(values)+8)
	h.put(a, 1)
	h.put(a+8, cls)
	h.put(a-0x18, arr-1)
	for i, v := range values {
		h.put(arr+8*uint64(i), v)
	}
	return a
}

// values is the values array of an instance made by instance.
func (h *fakeHeap) values(obj uint64) uint64 {
	w, _ := h.p.m.u64(obj - 0x18)
	return w + 1
}

// slotted is a heap type whose instances keep names in __slots__ (member
// descriptors in the class dict, T_OBJECT_EX slots after the header).
func (h *fakeHeap) slotted(name string, slots []string) uint64 {
	l := &h.p.layout
	a := h.typeObject(name, 0x10+8*uint64(len(slots)), flagHeapType)
	var descrs []uint64
	for i := range slots {
		def := h.alloc(0x18)
		h.put(def+l.MemberDefType, tObjectEx)
		h.put(def+l.MemberDefOffset, 0x10+8*uint64(i))
		d := h.alloc(int(l.MemberDescrDef) + 8)
		h.put(d, 1)
		h.put(d+8, h.p.types.member)
		h.put(d+l.MemberDescrDef, def)
		descrs = append(descrs, d)
	}
	h.put(a+l.TypeDict, h.dict(slots, descrs))
	h.put(a+l.TypeMro, h.tuple(a, h.p.types.object))
	return a
}

// object is an instance of a slotted class with its slots' values.
func (h *fakeHeap) object(cls uint64, slots ...uint64) uint64 {
	a := h.alloc(0x10 + 8*len(slots))
	h.put(a, 1)
	h.put(a+8, cls)
	for i, v := range slots {
		h.put(a+0x10+8*uint64(i), v)
	}
	return a
}

// typeObject is a type's header: name, size, flags.
func (h *fakeHeap) typeObject(name string, basicsize, flags uint64) uint64 {
	l := &h.p.layout
	a := h.alloc(fakeTypeSize)
	h.put(a, 1)
	h.put(a+8, h.p.types.typ)
	cname := h.alloc(len(name) + 1)
	copy(h.f.data[cname-h.f.base:], name)
	h.put(a+l.TypeName, cname)
	h.put(a+l.TypeBasicSize, basicsize)
	h.put(a+l.TypeFlags, flags)
	return a
}

// dictInstance is an instance of cls whose attributes are in a dict of its
// own (3.12: the dict pointer before the object), combined: as instances
// with more attributes than shared keys hold have.
func (h *fakeHeap) dictInstance(cls uint64, names []string, values []uint64) uint64 {
	a := h.alloc(0x10)
	h.put(a, 1)
	h.put(a+8, cls)
	h.put(a-0x18, h.dict(names, values))
	return a
}
