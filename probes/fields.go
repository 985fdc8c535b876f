package probes

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Fields says where a native spec's struct offsets come from, so that one
// spec reads builds whose structs moved: a deref names a field
// (server_slot.task) instead of a byte count, and at attach each field's
// offset is taken from the DWARF of the binaries that define the struct
// when they carry it, else from the release the build says it is
// (docs/probe-spec.md, Fields).
type Fields struct {
	// DWARF lists the files (as the process maps them) whose debug info
	// is searched for the structs, in order.
	DWARF []string
	// Build, when set, is an int the binary holds that numbers its release
	// (llama.cpp's LLAMA_BUILD_NUMBER); it picks the release whose offsets
	// are used where DWARF has none.
	Build *BuildSymbol
	// Releases, newest first: the offsets of every field in builds from
	// Since on (until the next newer release's Since).
	Releases []*Release
	Line     int
}

// BuildSymbol is an int variable found by symbol in one of Binary.
type BuildSymbol struct {
	Binary []string
	Symbol string
}

// Release is one layout of the structs a spec reads, as worked out on the
// builds its Name says.
type Release struct {
	Name    string
	Since   int64
	Offsets map[string]int64
	Line    int
}

// Field is a struct member a spec names: Struct.Member.
type Field struct{ Struct, Member string }

func (f Field) String() string { return f.Struct + "." + f.Member }

// ParseField splits "server_slot.task" (a struct may be qualified:
// "ns::type.member").
func ParseField(s string) (Field, bool) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 || i == len(s)-1 || !fieldName.MatchString(s) {
		return Field{}, false
	}
	return Field{s[:i], s[i+1:]}, true
}

var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*\.[A-Za-z_][A-Za-z0-9_]*$`)

// Names lists every field the releases give an offset for, sorted.
func (f *Fields) Names() []string {
	if f == nil || len(f.Releases) == 0 {
		return nil
	}
	return sortedKeys(f.Releases[0].Offsets)
}

// Choose is the release whose offsets hold for build number build: the
// newest whose Since is at most build. known false (the binary says no
// number) or a build older than every release gives the newest, with a note
// saying so; the attach-time sanity checks guard that guess.
func (f *Fields) Choose(build int64, known bool) (*Release, string) {
	newest := f.Releases[0]
	if !known {
		return newest, "build number unknown: offsets of the newest release " + newest.Name + " assumed"
	}
	for _, r := range f.Releases {
		if r.Since <= build {
			return r, ""
		}
	}
	return newest, fmt.Sprintf("build %d is older than every release in the spec: offsets of %s assumed", build, newest.Name)
}

// OffsetExpr is one deref offset: Const plus or minus field offsets
// ("server_slot.task - server_slot.spec_i_batch").
type OffsetExpr struct {
	Const int64
	Terms []Term
}

// Term is a field's offset, added or subtracted.
type Term struct {
	Field string
	Neg   bool
}

// Eval is the expression's value with the offsets given; false names the
// first field missing.
func (e *OffsetExpr) Eval(offsets map[string]int64) (int64, string, bool) {
	x := e.Const
	for _, t := range e.Terms {
		off, ok := offsets[t.Field]
		if !ok {
			return 0, t.Field, false
		}
		if t.Neg {
			off = -off
		}
		x += off
	}
	return x, "", true
}

func (e *OffsetExpr) String() string {
	var b strings.Builder
	for i, t := range e.Terms {
		switch {
		case t.Neg:
			b.WriteString("-")
		case i > 0:
			b.WriteString("+")
		}
		b.WriteString(t.Field)
	}
	if e.Const != 0 || len(e.Terms) == 0 {
		if len(e.Terms) > 0 && e.Const > 0 {
			b.WriteString("+")
		}
		b.WriteString(strconv.FormatInt(e.Const, 10))
	}
	return b.String()
}

var exprTerm = regexp.MustCompile(`^\s*([+-]?)\s*([^\s+-]+)\s*`)

// ParseOffsetExpr reads an integer or a sum of fields and integers.
func ParseOffsetExpr(s string) (*OffsetExpr, error) {
	e := &OffsetExpr{}
	rest := s
	for first := true; strings.TrimSpace(rest) != ""; first = false {
		m := exprTerm.FindStringSubmatch(rest)
		if m == nil || (m[1] == "" && !first) {
			return nil, fmt.Errorf("%q: expected fields and integers joined by + or -", s)
		}
		rest = rest[len(m[0]):]
		neg := m[1] == "-"
		if n, err := strconv.ParseInt(m[2], 0, 32); err == nil {
			if neg {
				n = -n
			}
			e.Const += n
			continue
		}
		if _, ok := ParseField(m[2]); !ok {
			return nil, fmt.Errorf("%q: %q is neither an integer nor a field (struct.member)", s, m[2])
		}
		if len(e.Terms) >= maxTerms {
			return nil, fmt.Errorf("%q: more than %d fields", s, maxTerms)
		}
		e.Terms = append(e.Terms, Term{Field: m[2], Neg: neg})
	}
	if len(e.Terms) == 0 && strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty offset")
	}
	return e, nil
}

const maxTerms = 8

// fields parses a spec's fields mapping.
func (p *parser) specFields(n *yaml.Node) *Fields {
	f := p.fields(n, "fields", "dwarf", "build", "releases")
	out := &Fields{Line: n.Line}
	if d, ok := f["dwarf"]; ok {
		out.DWARF = p.strs(d, "fields.dwarf")
	}
	if b, ok := f["build"]; ok {
		bf := p.fields(b, "fields.build", "binary", "symbol")
		out.Build = &BuildSymbol{}
		if v := p.need(bf, "binary", b, "fields.build", "the files that hold the build number"); v != nil {
			out.Build.Binary = p.strs(v, "fields.build.binary")
		}
		if v := p.need(bf, "symbol", b, "fields.build", "an int variable"); v != nil {
			out.Build.Symbol = p.str(v, "fields.build.symbol")
		}
	}
	r, ok := f["releases"]
	if !ok || r.Kind != yaml.SequenceNode || len(r.Content) == 0 {
		p.fail(n, "fields: expected releases, a list of {name, since, offsets}, newest first (the offsets used where DWARF has none)")
		return out
	}
	for _, c := range r.Content {
		out.Releases = append(out.Releases, p.release(c))
	}
	if p.err != nil {
		return out
	}
	names := sortedKeys(out.Releases[0].Offsets)
	for i, rel := range out.Releases {
		if i > 0 && rel.Since >= out.Releases[i-1].Since {
			p.failAt(rel.Line, "fields.releases: %s (since %d) must be older than %s (since %d): list the newest first", rel.Name, rel.Since, out.Releases[i-1].Name, out.Releases[i-1].Since)
		}
		if got := sortedKeys(rel.Offsets); strings.Join(got, ",") != strings.Join(names, ",") {
			p.failAt(rel.Line, "fields.releases: %s gives %s, %s gives %s: every release names the same fields", rel.Name, strings.Join(got, ", "), out.Releases[0].Name, strings.Join(names, ", "))
		}
	}
	return out
}

func (p *parser) release(n *yaml.Node) *Release {
	f := p.fields(n, "fields.releases", "name", "since", "offsets")
	r := &Release{Line: n.Line, Offsets: map[string]int64{}}
	if v := p.need(f, "name", n, "fields.releases", "the release tags and commits the offsets were worked out on"); v != nil {
		r.Name = p.str(v, "fields.releases.name")
	}
	if v := p.need(f, "since", n, "fields.releases", "the first build number with these offsets"); v != nil {
		r.Since = p.int(v, "fields.releases.since")
	}
	o, ok := f["offsets"]
	if !ok || o.Kind != yaml.MappingNode || len(o.Content) == 0 {
		p.fail(n, "fields.releases: expected offsets, a mapping of struct.member to byte offset")
		return r
	}
	for i := 0; i+1 < len(o.Content); i += 2 {
		k, v := o.Content[i], o.Content[i+1]
		if _, ok := ParseField(k.Value); !ok {
			p.fail(k, "fields.releases.offsets: %q is not struct.member", k.Value)
		}
		if _, dup := r.Offsets[k.Value]; dup {
			p.fail(k, "fields.releases.offsets: %q given twice", k.Value)
		}
		off := p.int(v, "fields.releases.offsets."+k.Value)
		if off < 0 || off > maxFieldOffset {
			p.fail(v, "fields.releases.offsets.%s: %d is not a byte offset (0..%d)", k.Value, off, maxFieldOffset)
		}
		r.Offsets[k.Value] = off
	}
	return r
}

// need is f's key, or nil after failing with what it is for.
func (p *parser) need(f map[string]*yaml.Node, key string, n *yaml.Node, what, forWhat string) *yaml.Node {
	v, ok := f[key]
	if !ok {
		p.fail(n, "%s: missing %s (%s)", what, key, forWhat)
	}
	return v
}

// maxFieldOffset bounds a field's offset, from a spec or from DWARF: the
// BPF program's derefs are 32-bit signed.
const maxFieldOffset = 1 << 30

// MaxFieldOffset is maxFieldOffset, for the loader's DWARF reader.
const MaxFieldOffset = maxFieldOffset

// derefEntry reads one deref offset: an integer or an expression of fields.
func (p *parser) derefEntry(n *yaml.Node, what string) (int64, *OffsetExpr) {
	if n.Kind == yaml.ScalarNode {
		if x, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return x, nil
		}
	}
	if n.Kind != yaml.ScalarNode {
		p.fail(n, "%s: expected a byte offset or fields joined by + and -", what)
		return 0, nil
	}
	e, err := ParseOffsetExpr(n.Value)
	if err != nil {
		p.fail(n, "%s: %v", what, err)
		return 0, nil
	}
	return e.Const, e
}

// checkFieldUse: every field a deref names is in the spec's releases.
func (p *parser) checkFieldUse(s *Spec, n *yaml.Node) {
	if p.err != nil {
		return
	}
	known := map[string]bool{}
	for _, name := range s.Fields.Names() {
		known[name] = true
	}
	for _, name := range StageNames {
		st := s.Stages[name]
		if st == nil {
			continue
		}
		for _, nv := range append(st.Boundaries()[0], st.Boundaries()[1]...) {
			for _, e := range nv.Value.DerefExpr {
				for _, t := range exprTerms(e) {
					if !known[t.Field] {
						p.failAt(nv.Value.Line, "stages.%s: deref names field %s, which no fields.releases entry gives an offset for (have: %s)", name, t.Field, strings.Join(sortedKeys(known), ", "))
					}
				}
			}
		}
	}
	if s.Fields != nil && len(s.Fields.DWARF) == 0 && s.Fields.Build == nil && len(s.Fields.Releases) > 1 {
		p.fail(n, "fields: several releases but neither dwarf nor build to choose between them")
	}
}

func exprTerms(e *OffsetExpr) []Term {
	if e == nil {
		return nil
	}
	return e.Terms
}
