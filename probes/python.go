package probes

import (
	"regexp"

	"gopkg.in/yaml.v3"
)

var (
	pyName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	pyDots = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	pyPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\[(\*|[0-9]+)\])?(\.[A-Za-z_][A-Za-z0-9_]*(\[(\*|[0-9]+)\])?)*$`)
)

// pythonStage checks a stage given by module and qualname.
func (p *parser) pythonStage(s *Stage, n *yaml.Node, f map[string]*yaml.Node, what string) {
	if s.Name == Accept {
		// Acceptance that reaches the host a loop later (SGLang's overlap
		// scheduler) is not read from Python targets yet.
		p.fail(n, "%s: Python accept stages are not supported yet (draft, verify and draft_extend are)", what)
	}
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
		for key, dst := range map[string]*string{"arg": &req.Arg, "path": &req.Path, "id": &req.ID} {
			v, ok := rf[key]
			if !ok {
				p.fail(r, "%s.requests: missing %s", what, key)
				continue
			}
			*dst = p.str(v, what+".requests."+key)
		}
		if req.Arg != "" && !pyName.MatchString(req.Arg) {
			p.fail(rf["arg"], "%s.requests.arg: %q is not an argument name", what, req.Arg)
		}
		if req.Path != "" && !pyPath.MatchString(req.Path) {
			p.fail(rf["path"], "%s.requests.path: %q is not an object path like reqs[*] or batch.reqs[*]", what, req.Path)
		}
		if req.ID != "" && !pyPath.MatchString(req.ID) {
			p.fail(rf["id"], "%s.requests.id: %q is not an attribute path like rid", what, req.ID)
		}
		s.Requests = req
	}
}
