package probes

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/specprobe/specprobe/internal/safefile"
	"github.com/specprobe/specprobe/procgroup"
	"github.com/specprobe/specprobe/spanschema"
)

// Error is a mistake in a spec, with the place it was found.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// MaxSpecBytes bounds a spec file: the catalog's largest is a few KiB.
const MaxSpecBytes = 1 << 20

// Load reads and checks a spec file. Only a regular file is read (a FIFO or
// /dev/zero given by mistake, or by someone else, is refused before a byte is
// read), and no larger than MaxSpecBytes.
func Load(path string) (*Spec, error) {
	data, err := safefile.ReadRegular(path, MaxSpecBytes)
	if err != nil {
		return nil, fmt.Errorf("probe spec: %w", err)
	}
	return Parse(path, data)
}

// Parse checks a spec; file names it in errors.
func Parse(file string, data []byte) (*Spec, error) {
	p := parser{file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, p.yamlError(data, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &Error{File: file, Msg: "empty spec: expected a mapping with engine, match and stages"}
	}
	spec := p.spec(doc.Content[0])
	if p.err != nil {
		return nil, p.err
	}
	spec.File = file
	return spec, nil
}

type parser struct {
	file string
	err  error
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are yaml.v3's parser (not scanner) messages: their line
// is 0-based and that of the construct the mistake broke, not the
// mistake's own (yaml.v3 decode.go fail(): only scanner errors add one).
var yamlParserProblems = map[string]bool{
	"did not find expected <stream-start>": true, "did not find expected <document start>": true,
	"did not find expected node content": true, "did not find expected key": true,
	"did not find expected '-' indicator": true, "did not find expected ',' or ']'": true,
	"did not find expected ',' or '}'": true, "found duplicate %YAML directive": true,
	"found incompatible YAML document": true, "found undefined tag handle": true,
	"found duplicate %TAG directive": true,
}

// yamlError gives a YAML error the line of the mistake: the first line at
// which the document stops parsing with that problem. yaml.v3's own line is
// where the enclosing construct began (a mapping several lines up, or one
// line early), used only where the search finds nothing.
func (p *parser) yamlError(data []byte, err error) error {
	line, msg := yamlProblem(err)
	if yamlParserProblems[msg] && line > 0 {
		line++
	}
	if l := firstFailingLine(data, msg); l > 0 {
		line = l
	}
	return &Error{File: p.file, Line: line, Msg: "invalid YAML: " + msg}
}

func yamlProblem(err error) (line int, msg string) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		return line, m[2]
	}
	return 0, strings.TrimPrefix(err.Error(), "yaml: ")
}

// maxSearchLines bounds firstFailingLine's work (it parses each prefix): a
// spec is tens of lines.
const maxSearchLines = 2000

// firstFailingLine is the first line whose prefix of the document fails
// to parse with problem msg; 0 when none does (or the file is too long to
// search). An earlier prefix that fails otherwise (it ends inside a
// multi-line construct that a later line closes) is passed over.
func firstFailingLine(data []byte, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxSearchLines {
		return 0
	}
	prefix := make([]byte, 0, len(data))
	for i, l := range lines {
		prefix = append(prefix, l...)
		var n yaml.Node
		if err := yaml.Unmarshal(prefix, &n); err != nil {
			if _, m := yamlProblem(err); m == msg {
				return i + 1
			}
		}
	}
	return 0
}

// failAt is fail at a line.
func (p *parser) failAt(line int, format string, args ...any) {
	p.fail(&yaml.Node{Line: line}, format, args...)
}

// fail records the first error only: later ones are usually its echoes.
func (p *parser) fail(n *yaml.Node, format string, args ...any) {
	if p.err == nil {
		p.err = &Error{File: p.file, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
	}
}

// fields walks a mapping node, rejecting keys not in allowed.
func (p *parser) fields(n *yaml.Node, what string, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n.Kind != yaml.MappingNode {
		p.fail(n, "%s: expected a mapping with keys %s", what, strings.Join(allowed, ", "))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !contains(allowed, k.Value) {
			p.fail(k, "%s: unknown key %q (expected one of %s)", what, k.Value, strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.fail(k, "%s: key %q given twice", what, k.Value)
		}
		out[k.Value] = v
	}
	return out
}

func (p *parser) str(n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Value == "" {
		p.fail(n, "%s: expected a non-empty string", what)
		return ""
	}
	return n.Value
}

// strs accepts a single string or a list of strings.
func (p *parser) strs(n *yaml.Node, what string) []string {
	if n.Kind == yaml.ScalarNode {
		if s := p.str(n, what); s != "" {
			return []string{s}
		}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "%s: expected a string or a list of strings", what)
		return nil
	}
	if len(n.Content) == 0 {
		p.fail(n, "%s: expected at least one string", what)
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, p.str(c, what))
	}
	return out
}

func (p *parser) int(n *yaml.Node, what string) int64 {
	x, err := strconv.ParseInt(n.Value, 0, 64)
	if n.Kind != yaml.ScalarNode || err != nil {
		p.fail(n, "%s: expected an integer, got %q", what, n.Value)
	}
	return x
}

func (p *parser) spec(n *yaml.Node) *Spec {
	f := p.fields(n, "spec", "engine", "description", "worker", "same_batch", "match", "stages", "fields", "thread_label", "root", RequestBoundary)
	s := &Spec{Stages: map[string]*Stage{}}
	if e, ok := f["engine"]; ok {
		s.Engine = p.str(e, "engine")
	} else {
		p.fail(n, "spec: missing engine (the name used with --engine)")
	}
	if d, ok := f["description"]; ok {
		s.Description = p.str(d, "description")
	}
	if w, ok := f["worker"]; ok {
		s.Worker = p.str(w, "worker")
	}
	if b, ok := f["same_batch"]; ok {
		if err := b.Decode(&s.SameBatch); err != nil {
			p.fail(b, "same_batch: want true or false")
		}
	}
	if l, ok := f["thread_label"]; ok {
		s.ThreadLabel = p.str(l, "thread_label")
	}
	if r, ok := f["root"]; ok {
		root, err := spanschema.ParseRootStyle(p.str(r, "root"))
		if err != nil {
			p.fail(r, "%v", err)
		}
		s.Root = root
	}
	if m, ok := f["match"]; ok {
		mf := p.fields(m, "match", "exe", "cmdline", "library", "module", "priority", "ranks")
		if v, ok := mf["priority"]; ok {
			s.Match.Priority = int(p.int(v, "match.priority"))
		}
		if v, ok := mf["ranks"]; ok {
			s.Match.Ranks = p.ranks(v)
		}
		for key, dst := range map[string]*[]string{"exe": &s.Match.Exe, "cmdline": &s.Match.Cmdline, "library": &s.Match.Library, "module": &s.Match.Module} {
			if v, ok := mf[key]; ok {
				*dst = p.strs(v, "match."+key)
			}
		}
	}
	st, ok := f["stages"]
	if !ok {
		p.fail(n, "spec: missing stages (draft, verify, accept, draft_extend)")
		return s
	}
	sf := p.fields(st, "stages", StageNames...)
	for _, name := range StageNames {
		if v, ok := sf[name]; ok {
			s.Stages[name] = p.stage(name, v)
		}
	}
	if _, ok := sf[Verify]; !ok && p.err == nil {
		p.fail(st, "stages: missing verify (every spec needs the verify stage)")
	}
	if b, ok := f[RequestBoundary]; ok {
		p.requestBoundary(s, b)
	}
	if fl, ok := f["fields"]; ok {
		s.Fields = p.specFields(fl)
	}
	p.checkFieldUse(s, n)
	p.checkValueChecks(s)
	return s
}

// requestBoundary reads the function whose calls are the requests of a
// spec whose stages name none: a native or Python function, nothing read.
func (p *parser) requestBoundary(s *Spec, n *yaml.Node) {
	p.fields(n, RequestBoundary, "binary", "symbol", "module", "qualname", "process")
	if p.err != nil {
		return
	}
	if s.NamesRequests() {
		p.fail(n, "%s: the stages name their requests (request_id, requests); a boundary is for a spec whose stages name none", RequestBoundary)
		return
	}
	s.Stages[RequestBoundary] = p.stage(RequestBoundary, n)
}

func (p *parser) stage(name string, n *yaml.Node) *Stage {
	what := "stages." + name
	if name == RequestBoundary {
		what = name
	}
	f := p.fields(n, what, "binary", "symbol", "scope", "request_id", "values", "module", "qualname", "requests", "when", "read_from", "accepted", "drafted", "process")
	s := &Stage{Name: name, Line: n.Line, Values: map[string]*Value{}}
	if pr, ok := f["process"]; ok {
		s.Process = p.strs(pr, what+".process")
		for _, name := range s.Process {
			if !procgroup.IsName(name) {
				p.fail(pr, "%s.process: %q is not the name in a process title (VLLM::Worker_TP0 is Worker)", what, name)
			}
		}
	}
	if _, ok := f["module"]; ok {
		p.pythonStage(s, n, f, what)
		return s
	}
	if _, ok := f["qualname"]; ok {
		p.fail(n, "%s: qualname needs module (a Python stage is module + qualname)", what)
	}
	for _, key := range []string{"requests", "when", "read_from", "accepted", "drafted"} {
		if r, ok := f[key]; ok {
			p.fail(r, "%s.%s: only Python stages have %s (native stages use request_id and values)", what, key, key)
		}
	}
	if b, ok := f["binary"]; ok {
		s.Binary = p.strs(b, what+".binary")
	} else {
		p.fail(n, "%s: missing binary (the file that holds the symbol, as the process maps it)", what)
	}
	if sym, ok := f["symbol"]; ok {
		s.Symbol = p.str(sym, what+".symbol")
	} else {
		p.fail(n, "%s: missing symbol", what)
	}
	s.Scope = ScopeRequest
	if name == RequestBoundary {
		s.Scope = ScopeBatch // serves no request of its own
	}
	if sc, ok := f["scope"]; ok {
		s.Scope = Scope(p.str(sc, what+".scope"))
		if s.Scope != ScopeRequest && s.Scope != ScopeBatch {
			p.fail(sc, "%s.scope: expected request or batch, got %q", what, sc.Value)
		}
	}
	if r, ok := f["request_id"]; ok {
		s.RequestID = p.value(r, what+".request_id")
	}
	if s.Scope == ScopeRequest && s.RequestID == nil {
		p.fail(n, "%s: scope request needs request_id (or use scope: batch)", what)
	}
	if s.Scope == ScopeBatch && s.RequestID != nil {
		p.fail(f["request_id"], "%s: a batch stage has no single request_id (use scope: request)", what)
	}
	if name == Accept && s.Scope != ScopeRequest {
		p.fail(n, "%s: the accept stage must have scope request", what)
	}
	if vals, ok := f["values"]; ok {
		if vals.Kind != yaml.MappingNode {
			p.fail(vals, "%s.values: expected a mapping of attribute name to value", what)
		}
		for i := 0; i+1 < len(vals.Content); i += 2 {
			k := vals.Content[i]
			if _, dup := s.Values[k.Value]; dup {
				p.fail(k, "%s.values: %q given twice", what, k.Value)
			}
			if !validName.MatchString(k.Value) {
				p.fail(k, "%s.values: %q is not a valid attribute name (letters, digits, _ and .)", what, k.Value)
			}
			s.Values[k.Value] = p.value(vals.Content[i+1], what+".values."+k.Value)
		}
	}
	p.checkLimits(s, n, what)
	return s
}

var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

func (p *parser) checkLimits(s *Stage, n *yaml.Node, what string) {
	if p.err != nil {
		return
	}
	for b, vals := range s.Boundaries() {
		strings := 0
		for _, v := range vals {
			if v.Value.Type == TypeString {
				strings++
			}
		}
		if len(vals) > MaxValues {
			p.fail(n, "%s: %d values read at %s, at most %d", what, len(vals), Boundary(b), MaxValues)
		}
		if strings > 1 {
			p.fail(n, "%s: %d string values read at %s, at most 1", what, strings, Boundary(b))
		}
	}
}

func (p *parser) value(n *yaml.Node, what string) *Value {
	f := p.fields(n, what, "at", "from", "deref", "type", "size", "elem_size", "add", "check")
	v := &Value{Line: n.Line, Size: 8, ElemSize: 4}
	if at, ok := f["at"]; ok {
		switch p.str(at, what+".at") {
		case "entry":
			v.At = Entry
		case "exit":
			v.At = Exit
		default:
			p.fail(at, "%s.at: expected entry or exit, got %q", what, at.Value)
		}
	} else {
		p.fail(n, "%s: missing at (entry or exit)", what)
	}
	if from, ok := f["from"]; ok {
		v.From = p.source(from, what+".from")
	} else {
		p.fail(n, "%s: missing from (arg0..arg5 or ret)", what)
	}
	if v.From == SourceRet && v.At == Entry {
		p.fail(f["from"], "%s: the return value can only be read at exit", what)
	}
	if d, ok := f["deref"]; ok {
		if d.Kind != yaml.SequenceNode || len(d.Content) > MaxDeref {
			p.fail(d, "%s.deref: expected a list of at most %d byte offsets", what, MaxDeref)
		}
		var exprs []*OffsetExpr
		named := false
		for _, c := range d.Content {
			x, e := p.derefEntry(c, what+".deref")
			v.Deref = append(v.Deref, x)
			exprs = append(exprs, e)
			named = named || e != nil && len(e.Terms) > 0
		}
		if named {
			v.DerefExpr = exprs
		}
	}
	if t, ok := f["type"]; ok {
		typ, known := typeNames[t.Value]
		if !known {
			p.fail(t, "%s.type: expected int, string or vector_len, got %q", what, t.Value)
		}
		v.Type = typ
	}
	if sz, ok := f["size"]; ok {
		v.Size = int(p.int(sz, what+".size"))
		if v.Size != 1 && v.Size != 2 && v.Size != 4 && v.Size != 8 {
			p.fail(sz, "%s.size: expected 1, 2, 4 or 8 bytes, got %d", what, v.Size)
		}
		if v.Type != TypeInt {
			p.fail(sz, "%s.size: only an int has a size", what)
		}
	}
	if es, ok := f["elem_size"]; ok {
		v.ElemSize = int(p.int(es, what+".elem_size"))
		if v.ElemSize < 1 || v.ElemSize > 1<<20 {
			p.fail(es, "%s.elem_size: expected a positive byte count, got %d", what, v.ElemSize)
		}
		if v.Type != TypeVectorLen {
			p.fail(es, "%s.elem_size: only a vector_len has an elem_size", what)
		}
	}
	if a, ok := f["add"]; ok {
		v.Add = p.int(a, what+".add")
	}
	if c, ok := f["check"]; ok {
		v.Check = p.valueCheck(c, what+".check")
	}
	return v
}

func (p *parser) source(n *yaml.Node, what string) Source {
	s := p.str(n, what)
	if s == "ret" {
		return SourceRet
	}
	if len(s) == 4 && strings.HasPrefix(s, "arg") && s[3] >= '0' && s[3] <= '5' {
		return Source(s[3] - '0')
	}
	p.fail(n, "%s: expected arg0..arg5 or ret, got %q", what, s)
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
