package probes

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

const pyItem = `\[(\*|-?[0-9]+|"[^"\]]*"|'[^'\]]*')\]`

var (
	pyName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	pyDots = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	// An object path: names joined by dots, each may be followed by items
	// ([n], [-1], [*], ["key"]); it may start with an item ([*]: every item
	// of the argument or return value itself).
	pyPath = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*|` + pyItem + `)(\.[A-Za-z_][A-Za-z0-9_]*|` + pyItem + `)*$`)
)

// pythonStage checks a stage given by module and qualname.
func (p *parser) pythonStage(s *Stage, n *yaml.Node, f map[string]*yaml.Node, what string) {
	for _, native := range []string{"binary", "symbol", "request_id", "values"} {
		if v, ok := f[native]; ok {
			p.fail(v, "%s.%s: a Python stage (module + qualname) has no %s", what, native, native)
		}
	}
	s.Module = p.str(f["module"], what+".module")
	if s.Module != "" && !pyDots.MatchString(s.Module) {
		p.fail(f["module"], "%s.module: %q is not a dotted module name", what, s.Module)
	}
	if q, ok := f["qualname"]; ok {
		s.Qualname = p.str(q, what+".qualname")
		if s.Qualname != "" && !pyDots.MatchString(s.Qualname) {
			p.fail(q, "%s.qualname: %q is not a qualified name like Class.method", what, s.Qualname)
		}
	} else {
		p.fail(n, "%s: missing qualname (e.g. EAGLEWorkerV2.verify)", what)
	}
	s.Scope = ScopeBatch
	if sc, ok := f["scope"]; ok && p.str(sc, what+".scope") != string(ScopeBatch) {
		p.fail(sc, "%s.scope: Python stages are batch stages; their requests come from requests:", what)
	}
	if r, ok := f["requests"]; ok {
		rf := p.fields(r, what+".requests", "arg", "path", "id")
		req := &PyRequests{Line: r.Line}
		// Without path, the argument itself; without id, the items are the ids.
		p.argPath(r, rf, what+".requests", &req.Arg, &req.ArgChoice, map[string]*string{"path": &req.Path, "id": &req.ID}, "reqs[*] or batch.reqs[*]")
		if req.ID != "" && !pyPath.MatchString(req.ID) {
			p.fail(rf["id"], "%s.requests.id: %q is not an attribute path like rid", what, req.ID)
		}
		s.Requests = req
	}
	if w, ok := f["when"]; ok {
		s.When = p.pyCond(w, what+".when")
		if s.Requests == nil || s.Name == Accept {
			p.fail(w, "%s.when: a condition is read with the requests of a draft, verify or draft_extend stage: give requests too", what)
		}
	}
	p.pythonAccept(s, n, f, what)
}

// maxWhenValues bounds a when's list of values: a stage is told apart by a
// handful of modes, and a longer list is a mistake.
const maxWhenValues = 16

// pyCond reads {arg, path, equals}; equals is one constant or a list of
// them (the call is kept when the value is any of them).
func (p *parser) pyCond(n *yaml.Node, what string) *PyCond {
	cf := p.fields(n, what, "arg", "path", "equals")
	c := &PyCond{Line: n.Line}
	// Without path, the argument itself.
	p.argPath(n, cf, what, &c.Arg, &c.ArgChoice, map[string]*string{"path": &c.Path}, "forward_mode")
	e, ok := cf["equals"]
	if !ok {
		p.fail(n, "%s: missing equals (a constant, or a list of them)", what)
		return c
	}
	c.Equals = p.strs(e, what+".equals")
	if len(c.Equals) > maxWhenValues {
		p.fail(e, "%s.equals: %d values, at most %d", what, len(c.Equals), maxWhenValues)
	}
	for i, v := range c.Equals {
		if slices.Contains(c.Equals[:i], v) {
			p.fail(e, "%s.equals: %q given twice", what, v)
		}
	}
	return c
}

// argPath reads the argument of an {arg, path, …} mapping into arg (or
// choice), its str fields into dst, the required ones missing reported,
// and checks path is an object path (like example).
func (p *parser) argPath(n *yaml.Node, f map[string]*yaml.Node, what string, arg *string, choice **ArgChoice, dst map[string]*string, example string, required ...string) {
	if a, ok := f["arg"]; ok {
		*arg, *choice = p.pyArg(a, what+".arg")
	} else {
		p.fail(n, "%s: missing arg", what)
	}
	for _, key := range slices.Sorted(maps.Keys(dst)) {
		d := dst[key]
		v, ok := f[key]
		if !ok {
			if slices.Contains(required, key) {
				p.fail(n, "%s: missing %s", what, key)
			}
			continue
		}
		*d = p.str(v, what+"."+key)
	}
	if path := *dst["path"]; path != "" && !pyPath.MatchString(path) {
		p.fail(f["path"], "%s.path: %q is not an object path like %s", what, path, example)
	}
}

// Bounds of an argument given as a choice: CPython puts no limit on a
// signature, but a spec naming more alternatives or a later position than
// these is a mistake.
const (
	maxArgNames    = 8
	maxArgPosition = 255
)

// pyArg reads an argument: a name (or return), a list of names (the first
// the function has is read) or a position in the signature.
func (p *parser) pyArg(n *yaml.Node, what string) (string, *ArgChoice) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!int":
		pos, err := strconv.Atoi(n.Value)
		if err != nil || pos < 0 || pos > maxArgPosition {
			p.fail(n, "%s: %s is not an argument position (0 to %d; 0 is self for a method)", what, n.Value, maxArgPosition)
		}
		return "", &ArgChoice{Position: pos}
	case n.Kind == yaml.SequenceNode:
		if len(n.Content) == 0 || len(n.Content) > maxArgNames {
			p.fail(n, "%s: expected 1 to %d argument names, the first the function has is read", what, maxArgNames)
		}
		c := &ArgChoice{}
		for _, item := range n.Content {
			name := p.str(item, what)
			switch {
			case name == ReturnArg:
				p.fail(item, "%s: %s is the return value, not an argument to choose", what, ReturnArg)
			case name != "" && !pyName.MatchString(name):
				p.fail(item, "%s: %q is not an argument name", what, name)
			case slices.Contains(c.Names, name):
				p.fail(item, "%s: %q given twice", what, name)
			}
			c.Names = append(c.Names, name)
		}
		return "", c
	}
	name := p.str(n, what)
	if name != "" && !pyName.MatchString(name) {
		p.fail(n, "%s: %q is not an argument name, a list of names or a position", what, name)
	}
	return name, nil
}

// pythonAccept checks what an accept stage reads: the request list and the
// accepted counts, either from the frame of a caller still running when it
// returns (read_from), or from its own frame. A verify may carry its own
// counts (accepted: {arg: return, ...}: the list it returns).
func (p *parser) pythonAccept(s *Stage, n *yaml.Node, f map[string]*yaml.Node, what string) {
	rf, hasFrom := f["read_from"]
	acc, hasAcc := f["accepted"]
	dr, hasDrafted := f["drafted"]
	switch {
	case s.Name == Verify && !hasFrom:
		if hasDrafted && !hasAcc {
			p.fail(dr, "%s.drafted: goes with accepted", what)
		}
		if hasAcc && s.Requests == nil {
			p.fail(acc, "%s.accepted: a verify's own counts are index-aligned with its requests: give requests too", what)
		}
		if hasAcc {
			s.Accepted = p.pyList(acc, what+".accepted", true)
		}
		if hasDrafted {
			s.Drafted = p.pyList(dr, what+".drafted", false)
		}
		return
	case s.Name != Accept:
		if hasFrom || hasAcc || hasDrafted {
			p.fail(n, "%s: read_from belongs to the accept stage, accepted and drafted to the accept and verify stages", what)
		}
		return
	}
	if !hasAcc || s.Requests == nil {
		p.fail(n, "%s: a Python accept stage needs requests and accepted (and read_from when they are read from a caller as it returns)", what)
		return
	}
	if hasFrom {
		s.ReadFrom = p.str(rf, what+".read_from")
		if s.ReadFrom != "" && !pyDots.MatchString(s.ReadFrom) {
			p.fail(rf, "%s.read_from: %q is not a qualified name like Class.method", what, s.ReadFrom)
		}
	}
	s.Accepted = p.pyList(acc, what+".accepted", true)
	if hasDrafted {
		s.Drafted = p.pyList(dr, what+".drafted", false)
	}
}

// pyList reads {arg, path} and, for counts, len (take each item's length),
// add (a constant added to each count) and sub (a number read with them,
// taken from each).
func (p *parser) pyList(n *yaml.Node, what string, counts bool) *PyList {
	keys := []string{"arg", "path"}
	if counts {
		keys = append(keys, "len", "add", "sub")
	}
	lf := p.fields(n, what, keys...)
	l := &PyList{Line: n.Line}
	p.argPath(n, lf, what, &l.Arg, &l.ArgChoice, map[string]*string{"path": &l.Path}, "counts[*]", "path")
	if v, ok := lf["len"]; ok {
		if err := v.Decode(&l.Len); err != nil {
			p.fail(v, "%s.len: want true or false", what)
		}
	}
	if v, ok := lf["add"]; ok {
		if err := v.Decode(&l.Add); err != nil {
			p.fail(v, "%s.add: want an integer", what)
		}
	}
	if v, ok := lf["sub"]; ok {
		l.Sub = p.pyList(v, what+".sub", false)
		if strings.Contains(l.Sub.Path, "[*]") {
			p.fail(v, "%s.sub: one number to take from each count, not a list (%s has [*])", what, l.Sub.Path)
		}
	}
	return l
}
