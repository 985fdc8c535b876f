package loader

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/probes"
)

// A spec's derefs may name struct fields (server_slot.task); their offsets
// come from the binary's DWARF when it has them. DWARF is written by
// whoever built the file, on a node where that may be anyone: the sections
// are read within elfsym's file budget and the bounds below, the walk keeps
// no more than it must, and a struct described two ways is refused.

// Bounds on DWARF, far above a real build's: llama.cpp's
// libllama-server-impl.so built with -O3 -g has about 60 MiB of it.
const (
	MaxDWARFBytes  = 512 << 20 // all .debug_* sections, uncompressed
	maxScopeDepth  = 256       // namespaces and types nested in each other
	maxMemberNames = 40        // listed in a missing member's error
)

// ErrDWARFTooLarge: a file's DWARF is past MaxDWARFBytes. Its offsets are
// then taken from the spec, as for a file without DWARF.
var ErrDWARFTooLarge = errors.New("DWARF too large")

// dwarfData is the file's DWARF, or nil when it has none; sizes are checked
// before debug/elf reads a byte of it.
func dwarfData(f *elfsym.File) (*dwarf.Data, error) {
	var total uint64
	has := false
	for _, s := range f.Sections {
		name := s.Name
		if !strings.HasPrefix(name, ".debug_") && !strings.HasPrefix(name, ".zdebug_") {
			continue
		}
		if s.Type == elf.SHT_NOBITS {
			continue // stripped: the section header kept, its bytes gone
		}
		size := s.Size // for an SHF_COMPRESSED section: its uncompressed size
		if strings.HasPrefix(name, ".zdebug_") {
			// The old GNU form carries its uncompressed size in a header
			// that debug/elf allocates from without a check.
			var hdr [12]byte
			if _, err := s.ReadAt(hdr[:], 0); err != nil || string(hdr[:4]) != "ZLIB" {
				return nil, fmt.Errorf("%s: section %s is not a ZLIB-compressed section", f.Name, name)
			}
			size = binary.BigEndian.Uint64(hdr[4:])
		}
		if size > MaxDWARFBytes || total+size > MaxDWARFBytes {
			return nil, fmt.Errorf("%s: %w: its DWARF sections hold more than %d MiB (%s claims %d bytes): not read", f.Name, ErrDWARFTooLarge, MaxDWARFBytes>>20, name, size)
		}
		total += size
		has = has || name == ".debug_info" || name == ".zdebug_info"
	}
	if !has {
		return nil, nil
	}
	d, err := readDWARF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: reading its DWARF: %w", f.Name, err)
	}
	return d, nil
}

// readDWARF turns a panic of debug/dwarf on a malformed file into an error:
// the file is someone else's, the tracer is not theirs to crash.
func readDWARF(f *elfsym.File) (d *dwarf.Data, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("malformed DWARF (%v)", r)
		}
	}()
	return f.DWARF()
}

// FieldOffset is one field as DWARF describes it.
type FieldOffset struct {
	Offset int64
	Units  int // compile units that define the struct with the member
}

// StructOffsets finds the byte offset of each wanted field in d: the member
// of a struct or class definition whose qualified name (namespaces and
// enclosing types joined by ::) is the field's struct. A field whose struct
// d does not define is left out; a struct defined without the member, or
// defined twice with the member at different offsets, is an error.
func StructOffsets(d *dwarf.Data, want []probes.Field) (out map[string]FieldOffset, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("malformed DWARF (%v)", r)
		}
	}()
	structs := map[string]map[string]bool{} // struct -> members wanted
	prefixes := map[string]bool{}           // scopes that may hold a wanted struct
	for _, f := range want {
		if structs[f.Struct] == nil {
			structs[f.Struct] = map[string]bool{}
		}
		structs[f.Struct][f.Member] = true
		parts := strings.Split(f.Struct, "::")
		for i := 1; i < len(parts); i++ {
			prefixes[strings.Join(parts[:i], "::")] = true
		}
	}
	w := &structWalk{structs: structs, prefixes: prefixes, found: map[string]FieldOffset{}, members: map[string][]string{}, defined: map[string]bool{}}
	if err := w.walk(d.Reader()); err != nil {
		return nil, err
	}
	for _, f := range want {
		if _, ok := w.found[f.String()]; ok || !w.defined[f.Struct] {
			continue
		}
		names := w.members[f.Struct]
		more := ""
		if len(names) > maxMemberNames {
			names, more = names[:maxMemberNames], ", ..."
		}
		return nil, fmt.Errorf("DWARF defines struct %s without a member %s (its members: %s%s)", f.Struct, f.Member, strings.Join(names, ", "), more)
	}
	return w.found, nil
}

type structWalk struct {
	structs  map[string]map[string]bool
	prefixes map[string]bool
	found    map[string]FieldOffset
	members  map[string][]string // of wanted structs, for errors
	defined  map[string]bool
}

// scope is an entry whose children are being read: a compile unit (""), a
// namespace or type (its name; "" for an anonymous namespace), or a wanted
// struct (its qualified name in wanted). A function's children are never
// read: types there have no name outside it.
type scope struct{ name, wanted string }

func (w *structWalk) walk(r *dwarf.Reader) error {
	var stack []scope
	for {
		e, err := r.Next()
		if err != nil {
			return err
		}
		if e == nil {
			return nil
		}
		if e.Tag == 0 {
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if len(stack) > 0 && stack[len(stack)-1].wanted != "" && (e.Tag == dwarf.TagMember || e.Tag == dwarf.TagVariable) {
			if err := w.member(stack[len(stack)-1].wanted, e); err != nil {
				return err
			}
		}
		if !e.Children {
			continue
		}
		s, walk := w.enter(stack, e)
		if !walk {
			r.SkipChildren()
			continue
		}
		if len(stack) >= maxScopeDepth {
			return fmt.Errorf("DWARF entries nested more than %d deep", maxScopeDepth)
		}
		stack = append(stack, s)
	}
}

// enter says whether an entry's children are read, and as what scope.
func (w *structWalk) enter(stack []scope, e *dwarf.Entry) (scope, bool) {
	name, _ := e.Val(dwarf.AttrName).(string)
	switch e.Tag {
	case dwarf.TagCompileUnit, dwarf.TagPartialUnit:
		return scope{}, true
	case dwarf.TagNamespace:
		q := qualify(stack, name)
		return scope{name: name}, name == "" || w.prefixes[q]
	case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType:
		if name == "" {
			return scope{}, false
		}
		if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); decl {
			return scope{}, false
		}
		q := qualify(stack, name)
		if w.structs[q] != nil {
			w.defined[q] = true
			return scope{name: name, wanted: q}, true
		}
		return scope{name: name}, w.prefixes[q]
	}
	return scope{}, false
}

// qualify is name's qualified name inside the scopes of stack.
func qualify(stack []scope, name string) string {
	var parts []string
	for _, s := range stack {
		if s.name != "" {
			parts = append(parts, s.name)
		}
	}
	return strings.Join(append(parts, name), "::")
}

// member records a wanted struct's member.
func (w *structWalk) member(st string, e *dwarf.Entry) error {
	name, _ := e.Val(dwarf.AttrName).(string)
	static := e.Tag == dwarf.TagVariable // DWARF 5's static member
	if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); decl {
		static = true // DWARF 4's
	}
	if len(w.members[st]) <= maxMemberNames && !static {
		w.members[st] = append(w.members[st], name)
	}
	if !w.structs[st][name] {
		return nil
	}
	key := st + "." + name
	if static {
		return fmt.Errorf("DWARF member %s is static: it is not in the struct", key)
	}
	off, err := memberOffset(e)
	if err != nil {
		return fmt.Errorf("DWARF member %s: %w", key, err)
	}
	prev, seen := w.found[key]
	if seen && prev.Offset != off {
		return fmt.Errorf("DWARF describes struct %s twice, with member %s at offset %d and at %d: refusing both", st, name, prev.Offset, off)
	}
	w.found[key] = FieldOffset{Offset: off, Units: prev.Units + 1}
	return nil
}

// memberOffset is a member's DW_AT_data_member_location: a constant
// (DWARF 3 on), or the DWARF 2 form DW_OP_plus_uconst N.
func memberOffset(e *dwarf.Entry) (int64, error) {
	var off int64
	switch v := e.Val(dwarf.AttrDataMemberLoc).(type) {
	case int64:
		off = v
	case []byte:
		if len(v) < 2 || v[0] != 0x23 { // DW_OP_plus_uconst
			return 0, fmt.Errorf("location expression %x is not DW_OP_plus_uconst", v)
		}
		x, n := binary.Uvarint(v[1:])
		if n <= 0 || n != len(v)-1 || x > probes.MaxFieldOffset {
			return 0, fmt.Errorf("location expression %x is not one offset", v)
		}
		off = int64(x)
	case nil:
		if e.Val(dwarf.AttrDataBitOffset) != nil {
			return 0, fmt.Errorf("a bit field: no byte offset to read it at")
		}
		return 0, nil // a union's members, and some first members, start at 0
	default:
		return 0, fmt.Errorf("data_member_location of type %T", v)
	}
	if off < 0 || off > probes.MaxFieldOffset {
		return 0, fmt.Errorf("offset %d is not a byte offset (0..%d)", off, probes.MaxFieldOffset)
	}
	return off, nil
}
