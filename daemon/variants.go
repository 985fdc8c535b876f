package daemon

import (
	"context"
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
	if !spec.IsPython() {
		return nil
	}
	var out []*probes.Spec
	for _, s := range probes.ByPriority(d.opts.Specs) {
		if s.Match.Priority > spec.Match.Priority && s.IsPython() {
			out = append(out, s)
		}
	}
	return out
}

// checkVariants starts a check of each attached target that is due, each
// on its own goroutine with the same deadline and read budget as a look
// at a candidate: the main loop never reads a target's memory.
func (d *Daemon) checkVariants(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.targets {
		if len(t.better) > 0 && t.upgrade == nil && !t.checking && !t.attachedAt.IsZero() && !now.Before(t.nextCheck) {
			t.nextCheck = now.Add(variantCheck)
			t.checking = true
			go d.checkVariant(t)
		}
	}
}

func (d *Daemon) checkVariant(t *target) {
	s := t.betterMatch(d.ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	t.checking = false
	if t.ended {
		if t.py != nil {
			t.py.Close()
		}
		return
	}
	if s != nil && t.upgrade == nil {
		t.upgrade = s
		t.cancel()
		d.log.printf("PID %d has imported %s: moving from spec %s to %s", t.id.PID, s.EngineModules()[0], t.engine, s.Engine)
	}
}

// betterMatch returns the first better spec whose module the target has
// imported now; its reads are bounded like a candidate's.
func (t *target) betterMatch(ctx context.Context) *probes.Spec {
	ctx, cancel := context.WithTimeout(ctx, examineTimeout)
	defer cancel()
	if t.budget == nil {
		t.budget = pyproc.NewBudget(examineReads, examineBytes)
	}
	t.budget.Reset(ctx)
	if t.py == nil {
		py, err := pyproc.AttachWith(t.id.PID, t.budget.Wrap)
		if err != nil {
			return nil
		}
		t.py = py
	}
	for _, s := range t.better {
		for _, m := range s.EngineModules() {
			if ok, _ := t.py.HasModule(m); ok {
				return s
			}
		}
	}
	return nil
}
