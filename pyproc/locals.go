package pyproc

import (
	"fmt"
	"strings"
)

// co_localspluskinds bits (3.11+): the slot holds a cell.
const (
	coFastCell = 0x40
	coFastFree = 0x80
)

// codeHeader reads a code object's fixed part after checking it is one.
func (p *Process) codeHeader(code uint64) (block, error) {
	l := &p.layout
	if !validObj(code) {
		return block{}, fmt.Errorf("bad code object pointer %#x", code)
	}
	n := max(l.CodeLocalsNames, l.CodeLocalsKinds, l.CodeCellvars, l.CodeFreevars, l.CodeNLocals) + 8
	b, err := p.m.block(code, int(n))
	if err == nil && b.u64(8) != p.types.code {
		err = fmt.Errorf("%#x is not a code object", code)
	}
	return b, err
}

// nameTable is one tuple of local names and the slot its first name uses.
type nameTable struct {
	names []uint64
	first int
	cell  bool // 3.10 cellvars/freevars: slots hold cells
}

// localTables returns the name tuples in the order a lookup should try them.
// 3.10 moves a cell argument's value into its cell and clears the plain
// slot, so cellvars and freevars go before varnames.
func (p *Process) localTables(code uint64) ([]nameTable, error) {
	l := &p.layout
	hdr, err := p.codeHeader(code)
	if err != nil {
		return nil, err
	}
	names, err := p.readTuple(hdr.u64(l.CodeLocalsNames), maxLocals)
	if err != nil {
		return nil, fmt.Errorf("code %#x: local names: %w", code, err)
	}
	if l.CodeNLocals == 0 {
		return []nameTable{{names: names}}, nil
	}
	nlocals := int(int32(hdr.u32(l.CodeNLocals)))
	cells, err1 := p.readTuple(hdr.u64(l.CodeCellvars), maxLocals)
	frees, err2 := p.readTuple(hdr.u64(l.CodeFreevars), maxLocals)
	if err1 != nil || err2 != nil || nlocals != len(names) {
		return nil, fmt.Errorf("code %#x: co_nlocals %d, %d varnames, cellvars/freevars: %v %v", code, nlocals, len(names), err1, err2)
	}
	return []nameTable{
		{names: cells, first: nlocals, cell: true},
		{names: frees, first: nlocals + len(cells), cell: true},
		{names: names},
	}, nil
}

// findLocal returns the slot of a local variable by name.
func (p *Process) findLocal(code uint64, name string) (localSlot, error) {
	tables, err := p.localTables(code)
	if err != nil {
		return localSlot{}, err
	}
	hash := p.strHash(name)
	var have []string
	for _, t := range tables {
		for i, n := range t.names {
			eq, err := p.strEquals(n, name, hash)
			if err != nil {
				return localSlot{}, fmt.Errorf("code %#x: local name %d: %w", code, t.first+i, err)
			}
			if eq {
				return localSlot{index: t.first + i, cell: t.cell}, nil
			}
		}
	}
	for _, t := range tables {
		for _, n := range t.names {
			if s, err := p.readStr(n); err == nil {
				have = append(have, s)
			}
		}
	}
	return localSlot{}, fmt.Errorf("no local %q in code %#x (locals: %s)", name, code, strings.Join(have, ", "))
}

// localNameTuples lists the name objects in slot order (3.10: varnames,
// cellvars, freevars; a cell argument appears twice).
func (p *Process) localNameTuples(code uint64) ([]uint64, error) {
	tables, err := p.localTables(code)
	if err != nil {
		return nil, err
	}
	var out []uint64
	if len(tables) == 3 {
		tables = []nameTable{tables[2], tables[0], tables[1]}
	}
	for _, t := range tables {
		out = append(out, t.names...)
	}
	return out, nil
}

// isCellSlot reads co_localspluskinds (3.11+) for slot i: only a slot of a
// cell or free variable holds a cell to look through; an argument that
// happens to be a cell object is returned as it is.
func (p *Process) isCellSlot(code uint64, i int) bool {
	l := &p.layout
	if l.CodeLocalsKinds == 0 {
		return false
	}
	kinds, err := p.m.ptr(code + l.CodeLocalsKinds)
	if err != nil {
		return false
	}
	if t, err := p.typeOf(kinds); err != nil || t != p.types.bytes && p.types.bytes != 0 {
		return false
	}
	n, err := p.m.u64(kinds + 0x10) // ob_size
	if err != nil || uint64(i) >= n {
		return false
	}
	k, err := p.m.u8(kinds + l.BytesData + uint64(i))
	return err == nil && k&(coFastCell|coFastFree) != 0
}

// readTuple returns a tuple's items (at most limit). One read covers the
// header and up to 15 items; a bigger tuple takes a second.
func (p *Process) readTuple(tup uint64, limit int) ([]uint64, error) {
	l := &p.layout
	if !validObj(tup) {
		return nil, fmt.Errorf("bad tuple pointer %#x", tup)
	}
	b, err := p.m.block(tup, int(l.TupleItems)+8*15)
	if err != nil {
		// The tuple may end right before an unmapped page.
		if b, err = p.m.block(tup, int(l.TupleItems)); err != nil {
			return nil, err
		}
	}
	if t := b.u64(8); t != p.types.tuple {
		if err := p.checkSubtype(t, flagTupleSubclass, "tuple"); err != nil {
			return nil, err
		}
	}
	n := b.u64(l.TupleSize)
	if n > uint64(limit) {
		return nil, fmt.Errorf("tuple at %#x: %d items (limit %d)", tup, int64(n), limit)
	}
	if l.TupleItems+8*n > uint64(len(b.b)) {
		if b, err = p.m.block(tup, int(l.TupleItems+8*n)); err != nil {
			return nil, err
		}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = b.u64(l.TupleItems + 8*uint64(i))
		if !validObj(out[i]) {
			return nil, fmt.Errorf("tuple at %#x: bad item %d (%#x)", tup, i, out[i])
		}
	}
	return out, nil
}
