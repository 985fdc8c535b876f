package pyproc

import "fmt"

// maxTableRead: a keys object up to this size is read whole; keysGuess
// bytes are read at first, which holds most instances' shared keys.
const (
	maxTableRead = 4096
	keysGuess    = 512
)

// span returns n bytes at addr from the copied table or entries, or reads
// them.
func (p *Process) span(v *dictView, addr uint64, n int) (block, error) {
	for _, t := range []block{v.table, v.ents} {
		if addr >= t.addr && addr-t.addr+uint64(n) <= uint64(len(t.b)) {
			return block{addr, t.b[addr-t.addr : addr-t.addr+uint64(n)]}, nil
		}
	}
	return p.m.block(addr, n)
}

// openKeys decodes a keys table with, for split tables, the values array
// that goes with it: a dict's ma_keys/ma_values, or (3.11+) a class's
// shared keys (ht_cached_keys) with an instance's values, which exist
// without any dict object. where names the owner in messages.
func (p *Process) openKeys(keys, values uint64, where string) (*dictView, error) {
	return p.openKeysAs(keys, values, where, false)
}

// keyIndex finds name's entry in a keys table by the names alone (a
// type's shared keys, whatever values an instance has).
func (p *Process) keyIndex(keys uint64, where, name string) (int64, bool, error) {
	v, err := p.openKeysAs(keys, 0, where, true)
	if err != nil {
		return 0, false, err
	}
	_, ix, ok, err := p.dictLookupIx(v, name)
	return ix, ok, err
}

// openKeysAs is openKeys; namesOnly views a split table without values.
func (p *Process) openKeysAs(keys, values uint64, where string, namesOnly bool) (*dictView, error) {
	if !validObj(keys) || values != 0 && !validObj(values) {
		return nil, fmt.Errorf("%s: bad keys %#x or values %#x", where, keys, values)
	}
	// Small tables (instance attributes, most classes) fit in one read.
	k, err := p.m.block(keys, keysGuess)
	if err != nil {
		if k, err = p.m.block(keys, 0x28); err != nil {
			return nil, err
		}
	}
	v := &dictView{}
	if err := p.keysView(v, k, values, where, namesOnly); err != nil {
		return nil, err
	}
	if v.emptyKeys {
		return v, nil
	}
	switch n := v.entries - keys + v.nentries*v.entrySize; {
	case n <= uint64(len(k.b)):
		v.table = k
	case n <= maxTableRead:
		v.table, _ = p.m.block(keys, int(n)) // on failure, read piecewise
	}
	return v, nil
}

// keysView decodes into v the header of the keys object whose first bytes
// (at least 0x28) are k.
func (p *Process) keysView(v *dictView, k block, values uint64, where string, namesOnly bool) error {
	l, keys := &p.layout, k.addr
	*v = dictView{keys: keys, hasHash: true, entrySize: 24, namesOnly: namesOnly}
	if l.DictKeysLegacy {
		v.size, v.nentries, v.indices = k.u64(0x8), k.u64(0x20), keys+0x28
		if v.size == 1 && v.nentries == 0 {
			*v = *emptyKeys()
			return nil // Py_EMPTY_KEYS: an empty dict
		}
		if v.size < 8 || v.size > maxDictSize || v.size&(v.size-1) != 0 {
			return fmt.Errorf("%s: bad size %d", where, v.size)
		}
		v.ixSize = ixSizeFor(v.size)
		v.entries = v.indices + v.size*v.ixSize
		if values != 0 {
			v.values = values
		}
	} else {
		log2, log2ix, kind := uint64(k.u8(0x8)), uint64(k.u8(0x9)), k.u8(0xa)
		if log2 == 0 && k.u64(0x18) == 0 {
			*v = *emptyKeys()
			return nil // Py_EMPTY_KEYS: an empty dict
		}
		if log2 < 3 || log2 > 20 || kind > kindSplit {
			return fmt.Errorf("%s: bad keys header (log2 %d, kind %d)", where, log2, kind)
		}
		v.size, v.nentries, v.indices = 1<<log2, k.u64(0x18), keys+0x20
		v.ixSize = ixSizeFor(v.size)
		if 1<<log2ix != v.size*v.ixSize {
			return fmt.Errorf("%s: index bytes %d do not match size %d", where, uint64(1)<<log2ix, v.size)
		}
		v.entries = v.indices + 1<<log2ix
		if kind != 0 {
			v.hasHash, v.entrySize = false, 16
		}
		if kind == kindSplit && !namesOnly {
			if values == 0 {
				return fmt.Errorf("%s: split keys without values", where)
			}
			v.values = values + l.DictValuesArray
		}
	}
	if v.nentries > v.size {
		return fmt.Errorf("%s: %d entries for %d slots", where, v.nentries, v.size)
	}
	return nil
}

// emptyKeys is the view of the shared empty keys object: no entries, and a
// probe ends at once.
func emptyKeys() *dictView {
	return &dictView{size: 1, ixSize: 1, emptyKeys: true}
}
