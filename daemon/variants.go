package daemon

import (
	"time"

	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
)

// The daemon attaches within a second of an exec, often while the server is
// still importing: an SGLang scheduler has imported the EAGLE V2 module
// (every worker imports it) before the module of the worker it runs
// (NGRAM, multi-layer EAGLE, …). A Python target attached with a spec that
// a higher-priority one may still beat is looked at again, and moved to
// that spec once its module appears.

// variantCheck is how often an attached target is looked at for a better spec.
const variantCheck = 500 * time.Millisecond

// betterSpecs are the Python specs that would win over spec if they matched.
func (d *Daemon) betterSpecs(spec *probes.Spec) []*probes.Spec {
	if !isPython(spec) {
		return nil
	}
	var out []*probes.Spec
	for _, s := range probes.ByPriority(d.opts.Specs) {
		if s.Match.Priority > spec.Match.Priority && isPython(s) {
			out = append(out, s)
		}
	}
	return out
}

// checkVariants looks at the attached targets that are due.
func (d *Daemon) checkVariants(now time.Time) {
	d.mu.Lock()
	var due []*target
	for _, t := range d.targets {
		if len(t.better) > 0 && t.upgrade == nil && !t.attachedAt.IsZero() && !now.Before(t.nextCheck) {
			t.nextCheck = now.Add(variantCheck)
			due = append(due, t)
		}
	}
	d.mu.Unlock()
	for _, t := range due {
		s := t.betterMatch()
		if s == nil {
			continue
		}
		d.mu.Lock()
		t.upgrade = s
		t.cancel()
		d.mu.Unlock()
		d.log.printf("PID %d has imported %s: moving from spec %s to %s", t.id.PID, engineModules(s)[0], t.engine, s.Engine)
	}
}

// betterMatch returns the first better spec whose module the target has
// imported now; only the daemon's loop calls it.
func (t *target) betterMatch() *probes.Spec {
	if t.py == nil {
		py, err := pyproc.Attach(t.id.PID)
		if err != nil {
			return nil
		}
		t.py = py
	}
	for _, s := range t.better {
		for _, m := range engineModules(s) {
			if ok, _ := t.py.HasModule(m); ok {
				return s
			}
		}
	}
	return nil
}
