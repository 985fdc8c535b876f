package loader

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/probes"
)

// Layout is where a spec's fields lie in one process: each offset and
// where it came from.
type Layout struct {
	Offsets map[string]int64
	Sources []FieldSource // sorted by field
	Release *probes.Release
	// Build is the build number the binary holds (BuildFrom says where);
	// Note says what was guessed.
	Build     int64
	BuildFrom string
	Note      string
	Skipped   []string // DWARF not read, and why
}

// FieldSource is one field's offset and its origin.
type FieldSource struct {
	Field  string
	Offset int64
	DWARF  bool
	From   string // "DWARF of FILE" or "release NAME"
	// Differs, for an offset from DWARF, is the release's when it is
	// another: the spec's table is wrong for this build.
	Differs *int64
}

func (s FieldSource) String() string {
	msg := fmt.Sprintf("%s = %d (%s", s.Field, s.Offset, s.From)
	if s.Differs != nil {
		msg += fmt.Sprintf("; the spec's release table says %d", *s.Differs)
	}
	return msg + ")"
}

// ResolveFields works out spec's field offsets in the files pid maps: from
// DWARF where the spec's dwarf files carry it, else from the release the
// build number picks. nil when the spec names no fields.
func ResolveFields(maps []Mapping, spec *probes.Spec) (*Layout, error) {
	fl := spec.Fields
	if fl == nil {
		return nil, nil
	}
	l := &Layout{Offsets: map[string]int64{}}
	known := false
	if fl.Build != nil {
		n, from, err := buildNumber(maps, fl.Build)
		if err != nil {
			return nil, fmt.Errorf("%s: fields.build: %w", spec.File, err)
		}
		l.Build, l.BuildFrom, known = n, from, from != "" && n > 0
	}
	l.Release, l.Note = fl.Choose(l.Build, known)
	if l.BuildFrom != "" && !known {
		// llama.cpp numbers a build by its git history: 0 built elsewhere.
		l.Note += fmt.Sprintf(" (%s is %d)", l.BuildFrom, l.Build)
		l.BuildFrom = ""
	}
	names := fl.Names()
	fromDWARF := map[string]FieldOffset{}
	dwarfFile := map[string]string{}
	for _, want := range fl.DWARF {
		for _, m := range maps {
			if !MatchBinary(m.Path, want) {
				continue
			}
			var missing []probes.Field
			for _, n := range names {
				if _, ok := fromDWARF[n]; !ok {
					f, _ := probes.ParseField(n)
					missing = append(missing, f)
				}
			}
			if len(missing) == 0 {
				break
			}
			got, err := fileFields(m, missing)
			if errors.Is(err, ErrDWARFTooLarge) || errors.Is(err, elfsym.ErrBudget) {
				// Too much to read: as if stripped (the checks guard the table).
				l.Skipped = append(l.Skipped, err.Error())
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s: fields: %w", spec.File, err)
			}
			for k, v := range got {
				fromDWARF[k], dwarfFile[k] = v, m.Path
			}
		}
	}
	for _, n := range names {
		rel := l.Release.Offsets[n]
		src := FieldSource{Field: n, Offset: rel, From: "release " + l.Release.Name}
		if d, ok := fromDWARF[n]; ok {
			src = FieldSource{Field: n, Offset: d.Offset, DWARF: true, From: "DWARF of " + dwarfFile[n]}
			if d.Offset != rel {
				src.Differs = &rel
			}
		}
		l.Offsets[n] = src.Offset
		l.Sources = append(l.Sources, src)
	}
	return l, nil
}

// Describe is the layout in one line per field, for attach and check; only
// of the fields named, when some are.
func (l *Layout) Describe(only ...string) []string {
	var out []string
	if l.BuildFrom != "" {
		out = append(out, fmt.Sprintf("build %d (%s): release %s", l.Build, l.BuildFrom, l.Release.Name))
	}
	release := false
	for _, s := range l.Sources {
		release = release || !s.DWARF
	}
	if l.Note != "" && release {
		out = append(out, l.Note)
	}
	out = append(out, l.Skipped...)
	for _, s := range l.Sources {
		if len(only) == 0 || slices.Contains(only, s.Field) {
			out = append(out, s.String())
		}
	}
	return out
}

// fileFields reads wanted fields from one mapped file's DWARF; none when it
// has no DWARF.
func fileFields(m Mapping, want []probes.Field) (map[string]FieldOffset, error) {
	f, err := m.openELF()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := dwarfData(f)
	if err != nil || d == nil {
		return nil, err
	}
	got, err := StructOffsets(d, want)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return got, nil
}

// buildNumber reads the int variable b names from the first mapped file
// that defines it; from is "" when none does.
func buildNumber(maps []Mapping, b *probes.BuildSymbol) (n int64, from string, err error) {
	for _, want := range b.Binary {
		for _, m := range maps {
			if !MatchBinary(m.Path, want) {
				continue
			}
			f, err := m.openELF()
			if err != nil {
				return 0, "", err
			}
			n, ok, err := intVariable(f, b.Symbol)
			f.Close()
			if err != nil {
				return 0, "", err
			}
			if ok {
				return n, b.Symbol + " in " + m.Path, nil
			}
		}
	}
	return 0, "", nil
}

// intVariable reads a 4-byte int variable from the file's data.
func intVariable(f *elfsym.File, name string) (int64, bool, error) {
	var sym *elf.Symbol
	err := f.Symbols(func(s elf.Symbol, _ bool) bool {
		if s.Name == name && elf.ST_TYPE(s.Info) == elf.STT_OBJECT && s.Section != elf.SHN_UNDEF {
			sym = &s
			return false
		}
		return true
	})
	if err != nil || sym == nil {
		return 0, false, err
	}
	// The symbol's own section: its value is an address in a linked file
	// and an offset into the section in an object file (Addr 0 there).
	if int(sym.Section) >= len(f.Sections) {
		return 0, false, fmt.Errorf("%s: symbol %s is in section %d of %d", f.Name, name, sym.Section, len(f.Sections))
	}
	sec := f.Sections[sym.Section]
	if sym.Value < sec.Addr || sym.Value-sec.Addr > sec.Size || sec.Size-(sym.Value-sec.Addr) < 4 {
		return 0, false, fmt.Errorf("%s: symbol %s at %#x is not inside its section %s", f.Name, name, sym.Value, sec.Name)
	}
	switch sec.Type {
	case elf.SHT_NOBITS:
		return 0, true, nil // .bss: zero
	case elf.SHT_PROGBITS:
		var b [4]byte
		if _, err := sec.ReadAt(b[:], int64(sym.Value-sec.Addr)); err != nil {
			return 0, false, fmt.Errorf("%s: reading %s: %w", f.Name, name, err)
		}
		return int64(int32(binary.LittleEndian.Uint32(b[:]))), true, nil
	}
	return 0, false, fmt.Errorf("%s: symbol %s is in section %s, which holds no data", f.Name, name, sec.Name)
}

// ResolvedStage is a copy of st whose derefs are the layout's offsets, each
// value's Origin saying how they were worked out. st itself is not changed:
// one spec serves processes of different builds.
func ResolvedStage(st *probes.Stage, l *Layout) (*probes.Stage, error) {
	out := *st
	out.Values = map[string]*probes.Value{}
	resolve := func(v *probes.Value, what string) (*probes.Value, error) {
		if v == nil || v.DerefExpr == nil {
			return v, nil
		}
		if l == nil {
			return nil, fmt.Errorf("stage %s: %s names fields, and the spec has no fields section", st.Name, what)
		}
		c := *v
		c.Deref = make([]int64, len(v.Deref))
		var parts []string
		for i, e := range v.DerefExpr {
			if e == nil {
				c.Deref[i] = v.Deref[i]
				parts = append(parts, fmt.Sprint(v.Deref[i]))
				continue
			}
			x, missing, ok := e.Eval(l.Offsets)
			if !ok {
				return nil, fmt.Errorf("stage %s: %s: no offset for field %s", st.Name, what, missing)
			}
			c.Deref[i] = x
			parts = append(parts, fmt.Sprintf("%d = %s", x, e))
		}
		c.Origin = "deref [" + strings.Join(parts, ", ") + "]"
		return &c, nil
	}
	var err error
	if out.RequestID, err = resolve(st.RequestID, "request_id"); err != nil {
		return nil, err
	}
	for name, v := range st.Values {
		if out.Values[name], err = resolve(v, "values."+name); err != nil {
			return nil, err
		}
	}
	return &out, nil
}
