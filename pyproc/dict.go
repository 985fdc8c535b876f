package pyproc

import (
	"errors"
	"fmt"
	"slices"
)

// maxDictSize bounds the index table we accept: 2^20 slots is far beyond any
// module or class dict, and beyond sys.modules of the largest servers.
const maxDictSize = 1 << 20

// maxProbe bounds one hashed probe sequence. In a real table (at most 2/3
// full) it ends within a few steps; a longer one means we misread the table,
// and the caller falls back to a scan.
const maxProbe = 4096

const (
	dkixEmpty = -1
	kindSplit = 2
)

// dictView is a dict's keys table, decoded once per lookup.
type dictView struct {
	keys      uint64 // the keys object
	indices   uint64
	size      uint64 // index slots, a power of two
	ixSize    uint64 // bytes per index
	entries   uint64
	entrySize uint64 // 24 with me_hash, 16 without
	hasHash   bool
	nentries  uint64
	values    uint64 // split dicts: the values array; 0 when combined
	// valuesCap bounds entry indices into values when the values say how
	// many slots they have (3.13's PyDictValues.capacity); 0: unknown.
	valuesCap uint64
	// table is the whole keys object when it is small enough to copy in one
	// read (most class and instance dicts): probes then cost no syscall.
	table block
	// emptyKeys: the shared empty keys object (Py_EMPTY_KEYS).
	emptyKeys bool
	// namesOnly: a split table read for its names alone (keyIndex); an
	// entry's value reads as its key, so that a found name is present.
	namesOnly bool
	// ents and vals hold all entries and a split table's values when a
	// walk over every entry read them at once (loadEntries).
	ents, vals block
}

func (p *Process) openDict(d uint64) (*dictView, error) {
	l := &p.layout
	if !validObj(d) {
		return nil, fmt.Errorf("bad dict pointer %#x", d)
	}
	hdr, err := p.m.block(d, int(l.DictValues)+8)
	if err != nil {
		return nil, err
	}
	if t := hdr.u64(8); t != p.types.dict {
		if err := p.checkSubtype(t, flagDictSubclass, "dict"); err != nil {
			return nil, err
		}
	}
	return p.openKeys(hdr.u64(l.DictKeys), hdr.u64(l.DictValues), fmt.Sprintf("dict at %#x", d))
}

func ixSizeFor(size uint64) uint64 {
	switch {
	case size <= 0xff:
		return 1
	case size <= 0xffff:
		return 2
	case size <= 0xffffffff:
		return 4
	}
	return 8
}

func (p *Process) dictIndex(v *dictView, slot uint64) (int64, error) {
	blk, err := p.span(v, v.indices+slot*v.ixSize, int(v.ixSize))
	if err != nil {
		return 0, err
	}
	b := blk.b
	switch v.ixSize {
	case 1:
		return int64(int8(b[0])), nil
	case 2:
		return int64(int16(uint16(b[0]) | uint16(b[1])<<8)), nil
	case 4:
		return int64(int32(blk.u32(0))), nil
	}
	return int64(blk.u64(0)), nil
}

// dictEntry returns entry ix; key or value 0 means a deleted or unset slot.
func (p *Process) dictEntry(v *dictView, ix uint64) (key, value uint64, hash int64, err error) {
	e, err := p.span(v, v.entries+ix*v.entrySize, int(v.entrySize))
	if err != nil {
		return 0, 0, 0, err
	}
	if v.hasHash {
		hash, key, value = int64(e.u64(0)), e.u64(8), e.u64(16)
	} else {
		key, value = e.u64(0), e.u64(8)
	}
	if v.namesOnly {
		return key, key, hash, nil
	}
	if v.values != 0 {
		if v.valuesCap != 0 && ix >= v.valuesCap {
			return key, 0, hash, nil // added to the shared keys after these values were made
		}
		if b := v.vals; v.values+8*ix >= b.addr && v.values+8*ix-b.addr+8 <= uint64(len(b.b)) {
			return key, b.u64(v.values + 8*ix - b.addr), hash, nil
		}
		if value, err = p.m.u64(v.values + 8*ix); err != nil {
			return 0, 0, 0, err
		}
	}
	return key, value, hash, nil
}

// loadEntries reads every entry of a table too big to have been copied
// whole, and a split table's values, in one read each, for a walk over all
// of them. Where a read fails the walk reads entry by entry.
func (p *Process) loadEntries(v *dictView) {
	n := v.nentries * v.entrySize
	if v.emptyKeys || n == 0 || n > maxRead {
		return
	}
	if t := v.table; v.entries < t.addr || v.entries-t.addr+n > uint64(len(t.b)) {
		v.ents, _ = p.m.block(v.entries, int(n))
	}
	if v.values != 0 {
		v.vals, _ = p.m.block(v.values, int(8*v.nentries))
	}
}

var errProbe = errors.New("probe sequence does not end")

// probeKnown is dictProbe for a name whose str is known (key: the str an
// instance dict of the type holds it as; others: strs known not to be the
// name; all checked in this Eval) in a combined table copied in part
// (v.table). It reads nothing: where dictProbe would read — an index or
// entry beyond the copy, a key that is some other str — it says it is not
// sure, and so where it would find nothing.
func (p *Process) probeKnown(v *dictView, key uint64, others []uint64, hash int64) (val uint64, sure bool) {
	if v.emptyKeys || v.values != 0 || v.namesOnly {
		return 0, false
	}
	t := v.table
	in := func(addr, n uint64) bool { return addr >= t.addr && addr-t.addr+n <= uint64(len(t.b)) }
	mask := v.size - 1
	i, perturb := uint64(hash)&mask, uint64(hash)
	for n := 0; n < maxProbe; n++ {
		if !in(v.indices+i*v.ixSize, v.ixSize) {
			return 0, false
		}
		ix, _ := p.dictIndex(v, i)
		if ix == dkixEmpty {
			return 0, false
		}
		if ix >= 0 {
			if uint64(ix) >= v.nentries || !in(v.entries+uint64(ix)*v.entrySize, v.entrySize) {
				return 0, false
			}
			k, val, h, _ := p.dictEntry(v, uint64(ix))
			switch {
			case k == 0 || v.hasHash && h != hash:
			case k == key:
				return val, val != 0
			case !slices.Contains(others, k):
				return 0, false // dictProbe would compare this str's text
			}
		}
		perturb >>= 5
		i = (i*5 + perturb + 1) & mask
	}
	return 0, false
}

// dictProbe looks key up the way CPython's lookdict does: start at
// hash&mask, perturb, stop at an empty slot. It returns the value and the
// entry index it sits at.
func (p *Process) dictProbe(v *dictView, key string, hash int64) (uint64, int64, bool, error) {
	mask := v.size - 1
	i, perturb := uint64(hash)&mask, uint64(hash)
	for n := 0; n < maxProbe; n++ {
		ix, err := p.dictIndex(v, i)
		if err != nil {
			return 0, 0, false, err
		}
		if ix == dkixEmpty {
			return 0, 0, false, nil
		}
		if ix >= 0 {
			if uint64(ix) >= v.nentries {
				return 0, 0, false, fmt.Errorf("index %d beyond %d entries", ix, v.nentries)
			}
			k, val, h, err := p.dictEntry(v, uint64(ix))
			if err != nil {
				return 0, 0, false, err
			}
			if k != 0 && (!v.hasHash || h == hash) {
				eq, err := p.strEquals(k, key, hash)
				if err == nil && eq {
					return val, ix, val != 0, nil
				}
			}
		}
		perturb >>= 5
		i = (i*5 + perturb + 1) & mask
	}
	return 0, 0, false, errProbe
}

// maxScan bounds the entries a scan compares: a few reads each, so a scan
// costs at most about a tenth of a second. Module dicts, class dicts and
// the sys.modules of the largest servers (~10,000 modules) are smaller; a
// dict larger than this is looked up by hash or not at all.
const maxScan = 1 << 15

// ErrScanTooLarge is returned for a lookup that would have to scan a dict
// of more than maxScan entries.
var ErrScanTooLarge = errors.New("too many entries to scan")

// probePath lists the keys a probe for hash meets up to entry ix, which
// it must reach (the last one listed); false if it does not.
func (p *Process) probePath(v *dictView, hash int64, ix int64) ([]uint64, bool) {
	if v.emptyKeys || v.values != 0 || v.namesOnly {
		return nil, false
	}
	var path []uint64
	mask := v.size - 1
	i, perturb := uint64(hash)&mask, uint64(hash)
	for n := 0; n < maxProbe && len(path) < maxProofReads/2; n++ {
		at, err := p.dictIndex(v, i)
		if err != nil || at == dkixEmpty || at >= 0 && uint64(at) >= v.nentries {
			return nil, false
		}
		if at >= 0 {
			k, _, h, err := p.dictEntry(v, uint64(at))
			switch {
			case err != nil:
				return nil, false
			case k == 0 || v.hasHash && h != hash:
			case at == ix:
				return append(path, k), true
			default:
				path = append(path, k)
			}
		}
		perturb >>= 5
		i = (i*5 + perturb + 1) & mask
	}
	return nil, false
}

// dictScan is the slow path: compare every key.
func (p *Process) dictScan(v *dictView, key string) (uint64, int64, bool, error) {
	hash := noHash // our hash would not match the cached ones: compare text only
	if p.hashOK > 0 {
		hash = p.strHash(key)
	}
	if v.nentries > maxScan {
		return 0, 0, false, fmt.Errorf("looking up %q: a dict of %d entries, without a hashed lookup that works: %w (at most %d)", key, v.nentries, ErrScanTooLarge, maxScan)
	}
	for ix := uint64(0); ix < v.nentries; ix++ {
		k, val, _, err := p.dictEntry(v, ix)
		if err != nil {
			return 0, 0, false, err
		}
		if k == 0 || val == 0 {
			continue
		}
		if eq, err := p.strEquals(k, key, hash); err == nil && eq {
			return val, int64(ix), true, nil
		}
	}
	return 0, 0, false, nil
}

// dictGet returns the value for a str key in the dict at d.
func (p *Process) dictGet(d uint64, key string) (uint64, bool, error) {
	v, err := p.openDict(d)
	if err != nil {
		return 0, false, err
	}
	return p.dictLookup(v, key)
}

// dictLookup probes by hash when our hash matches the target's, else scans.
func (p *Process) dictLookup(v *dictView, key string) (uint64, bool, error) {
	val, _, ok, err := p.dictLookupIx(v, key)
	return val, ok, err
}

// dictLookupIx also returns the entry index, which for split keys (shared
// by every instance of a class) can be reused with another instance's values.
func (p *Process) dictLookupIx(v *dictView, key string) (uint64, int64, bool, error) {
	if v.emptyKeys {
		return 0, 0, false, nil
	}
	if p.hashOK == 0 {
		p.checkHash(v)
	}
	if p.hashOK > 0 {
		val, ix, ok, err := p.dictProbe(v, key, p.strHash(key))
		if err == nil {
			return val, ix, ok, nil
		}
		p.Stats.Fallbacks++
	}
	return p.dictScan(v, key)
}

// dictKeys lists up to limit str keys, for error messages.
func (p *Process) dictKeys(d uint64, limit int) ([]string, error) {
	v, err := p.openDict(d)
	if err != nil {
		return nil, err
	}
	return p.viewKeys(v, limit)
}

// viewKeys lists up to limit str keys that have a value.
func (p *Process) viewKeys(v *dictView, limit int) ([]string, error) {
	var out []string
	for ix := uint64(0); ix < v.nentries && len(out) < limit; ix++ {
		k, val, _, err := p.dictEntry(v, ix)
		if err != nil {
			return out, err
		}
		if k == 0 || val == 0 {
			continue
		}
		if s, err := p.readStr(k); err == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// dictKeyObjs lists a dict's keys in insertion order (what iterating it in
// Python gives), at most limit.
func (p *Process) dictKeyObjs(d uint64, limit int) ([]uint64, error) {
	v, err := p.openDict(d)
	if err != nil {
		return nil, err
	}
	p.loadEntries(v)
	var out []uint64
	for ix := uint64(0); ix < v.nentries; ix++ {
		k, val, _, err := p.dictEntry(v, ix)
		if err != nil {
			return nil, err
		}
		if k == 0 || val == 0 {
			continue // deleted
		}
		if len(out) == limit {
			return nil, fmt.Errorf("more than %d keys", limit)
		}
		out = append(out, k)
	}
	return out, nil
}
