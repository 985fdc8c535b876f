package tracer

import (
	"fmt"
	"time"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/procgroup"
	"github.com/specprobe/specprobe/pyproc"
)

// Detect picks the catalog spec for pid, as attach does without --engine:
// from the process and the other processes of its server
// (probes.DetectServer); python names its interpreter for the message ("").
// anyRank takes the process whatever its rank (attach --any-rank).
//
// A Python server that matches a spec only by its title or command line
// has not imported its engine's worker yet (a scheduler loading its
// model): the spec that matched is the engine's default, and some of its
// variants never import the default's module, so tracing with it would
// wait for a module that never loads. Detect then looks again, by
// imported module only (the daemon's rule), every 100 ms for up to wait,
// saying so once through notify; with wait 0 it only says so.
func Detect(specs []*probes.Spec, pid int, anyRank bool, wait time.Duration, notify func(string)) (spec *probes.Spec, python string, err error) {
	proc, python, done := detectable(pid)
	defer done()
	proc.AnyRank = anyRank
	var others []probes.Process
	if server, ok := procgroup.Find(&procgroup.Kernel{}, pid); ok {
		for _, p := range server.Procs {
			if p.PID != pid && p.Titled {
				o, _, done := detectable(p.PID)
				defer done()
				others = append(others, o)
			}
		}
	}
	spec, err = probes.DetectServer(specs, proc, others)
	if spec == nil || err != nil || len(spec.EngineModules()) == 0 || proc.HasModule == nil {
		return spec, python, err
	}
	proc.RequireModule = true
	byModule := func() (*probes.Spec, error) { return probes.DetectServer(specs, proc, others) }
	if s, err := byModule(); s != nil || err != nil {
		return s, python, err
	}
	what := fmt.Sprintf("PID %d (%s) matches spec %s by its %s only: it has imported none of the modules that tell the catalog's Python specs apart (specprobe probes list), so which variant it runs is not known yet", pid, proc.Title, spec.Engine, matchedBy(spec, proc))
	if wait <= 0 {
		notify(what + "; attach waits --import-wait for one (an engine imports its worker once its model is loaded)")
		return spec, python, nil
	}
	notify(fmt.Sprintf("%s: waiting up to %s for one (an engine imports its worker once its model is loaded)", what, wait))
	s, err := waitFor(byModule, wait, 100*time.Millisecond)
	if s == nil && err == nil {
		err = fmt.Errorf("PID %d (%s) imported no module of a catalog Python spec within %s (--import-wait): if it is still loading its model, wait longer; to trace it as %s anyway, pass --engine %s", pid, proc.Title, wait, spec.Engine, spec.Engine)
	}
	return s, python, err
}

// waitFor calls try every tick until it finds a spec or fails, for up to
// wait; nil, nil when the time ran out.
func waitFor(try func() (*probes.Spec, error), wait, tick time.Duration) (*probes.Spec, error) {
	deadline := time.Now().Add(wait)
	for {
		if s, err := try(); s != nil || err != nil {
			return s, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		time.Sleep(min(tick, left))
	}
}

// matchedBy names what of the process a spec matched, for the message.
func matchedBy(s *probes.Spec, p probes.Process) string {
	switch {
	case s.Matches(p.Exe, "", nil):
		return "executable"
	case p.Title != "" && s.Matches("", p.Title, nil):
		return "title"
	case s.Matches("", p.Cmdline, nil):
		return "command line"
	}
	return "libraries"
}

// detectable is what detection reads of pid; done releases it.
func detectable(pid int) (proc probes.Process, python string, done func()) {
	proc, _ = loader.ProcessRecord(pid) // too many mappings: matched without them
	py, err := pyproc.Attach(pid)
	if err != nil {
		return proc, "", func() {}
	}
	proc.HasModule = func(m string) bool { ok, _ := py.HasModule(m); return ok }
	return proc, fmt.Sprintf(", python %s", py.Version()), func() { py.Close() }
}
