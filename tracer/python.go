package tracer

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanbuilder"
)

// pySession is the Python side of a session; nil when the spec has no Python
// stage, and then every method does nothing.
type pySession struct {
	proc    *pyproc.Process
	targets []loader.PyTarget
	calls   *pyCalls
	late    *spanbuilder.LateAccept
	match   *spanbuilder.CountMatcher
	sess    *loader.Session
	log     io.Writer
	// Threads whose exception slot watch_hit knows; others are looked up
	// when they first enter a stage.
	slots     map[uint32]bool
	replaced  int  // code objects followed to their replacement
	sameBatch bool // the spec's same_batch
}

func preparePython(cfg Config) (*pySession, error) {
	hasPython := false
	for _, st := range cfg.Spec.Stages {
		hasPython = hasPython || st.IsPython()
	}
	if !hasPython {
		return nil, nil
	}
	proc, err := pyproc.Attach(cfg.PID)
	if err != nil {
		return nil, fmt.Errorf("PID %d: %w", cfg.PID, err)
	}
	wait := cfg.ImportWait
	if wait == 0 {
		wait = 30 * time.Second
	}
	targets, err := loader.ResolvePython(proc, cfg.Spec, wait)
	if err != nil {
		proc.Close()
		return nil, err
	}
	return &pySession{proc: proc, targets: targets, log: cfg.Log, sameBatch: cfg.Spec.SameBatch}, nil
}

func (p *pySession) arm(sess *loader.Session) error {
	if p == nil {
		return nil
	}
	if err := sess.ArmPython(p.targets, p.proc); err != nil {
		return err
	}
	p.sess, p.slots = sess, map[uint32]bool{}
	p.watchThreads()
	sess.OnCodeFreed = p.codeFreed
	return nil
}

// codeFreed follows a stage whose code object was freed to its new one: a
// module reloaded, or the method reassigned, makes new code, and the old is
// freed once nothing runs or holds it.
func (p *pySession) codeFreed(site int) {
	t, ok := p.sess.PySite(site)
	if !ok {
		return
	}
	st := t.Stage
	old := t.Code.Addr
	code, err := p.proc.FindCode(st.Module, st.Qualname)
	var gone *pyproc.ModuleNotFoundError
	switch {
	case errors.As(err, &gone), pyproc.Exiting(err):
		// The module went with it: the interpreter is shutting down.
	case err != nil:
		fmt.Fprintf(p.log, "specprobe: stage %s (%s.%s): its code object was freed and the function is gone (%v): no longer traced\n", st.Name, st.Module, st.Qualname, err)
	case code.Addr == old || code.Suspends() || code.Immortal:
		fmt.Fprintf(p.log, "specprobe: stage %s (%s.%s): its code object was freed and no traceable one replaced it: no longer traced\n", st.Name, st.Module, st.Qualname)
	default:
		if err := p.sess.RearmPython(site, code, p.proc); err != nil {
			fmt.Fprintf(p.log, "specprobe: stage %s (%s.%s): code object replaced, but watching the new one failed: %v\n", st.Name, st.Module, st.Qualname, err)
			return
		}
		p.replaced++
		fmt.Fprintf(p.log, "specprobe: stage %s (%s.%s): code object replaced (%#x -> %#x; module reloaded or method reassigned): watching the new one\n", st.Name, st.Module, st.Qualname, old, code.Addr)
	}
}

// watchThreads gives watch_hit each new thread's state: an exit then tells a
// stage that raised from one that returned, and a pop from a reference to
// the code dropped while the call still runs.
func (p *pySession) watchThreads() {
	threads, _ := p.proc.Threads()
	for _, t := range threads {
		if t.TID <= 0 || p.slots[uint32(t.TID)] {
			continue
		}
		p.slots[uint32(t.TID)] = true
		_ = p.sess.SetThreadState(uint32(t.TID), t.Addr, p.proc.ExceptionSlot(t))
	}
}

// sink puts the late-acceptance matching in front of next when the spec has
// a Python accept stage.
func (p *pySession) sink(next spanbuilder.Sink, sess *loader.Session) spanbuilder.Sink {
	if p == nil {
		return next
	}
	out := next
	for _, t := range p.targets {
		if t.Stage.Accepted != nil && p.late == nil {
			p.late = spanbuilder.NewLateAccept(next)
			out = p.late
		}
		if t.Stage.Name == probes.Accept {
			p.match = spanbuilder.NewCountMatcher(p.late)
		}
	}
	p.calls = &pyCalls{sites: sess.PySite, match: p.match, late: p.late, typeName: p.proc.TypeName, pending: map[callKey][]pendingRead{}, lastStage: map[uint32]string{}}
	for _, t := range p.targets {
		if t.UserReads() {
			p.calls.user = &userReads{proc: p.proc, held: map[uint32]heldCounts{}}
		}
	}
	if p.sameBatch {
		p.calls.stepRids = map[uint32][]string{}
	}
	return out
}

func (p *pySession) expire(now time.Time) {
	if p != nil && p.late != nil {
		p.late.Expire(now)
	}
}

// lateCounts tells whether accepted counts reach the steps after they end.
func (p *pySession) lateCounts() bool { return p != nil && p.late != nil }

func (p *pySession) flush() {
	if p != nil && p.late != nil {
		p.late.CloseAll()
	}
}

func (p *pySession) describe(w io.Writer) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "  python %s\n", p.proc.Version())
	for _, t := range p.targets {
		fmt.Fprintf(w, "  %-12s %s.%s (%s:%d) code object %#x, watched on every thread\n",
			t.Stage.Name, t.Stage.Module, t.Stage.Qualname, t.Code.Filename, t.Code.FirstLine, t.Code.Addr)
		if r := t.Reads(); r != "" {
			fmt.Fprintf(w, "  %-12s %s\n", "", r)
		}
	}
}

// filter wraps the builder's Add with the reads of Python stage calls.
func (p *pySession) filter(add func(*spanbuilder.Event)) func(*spanbuilder.Event) {
	if p == nil {
		return add
	}
	return func(e *spanbuilder.Event) {
		if !e.Exit && !p.slots[e.TID] {
			p.watchThreads() // a thread started after attach
			p.slots[e.TID] = true
		}
		if e.Exit && e.Err != "" {
			for _, v := range e.Values[:e.NValues] {
				if v.Name == "exception" {
					e.Err = "raised " + p.proc.TypeName(uint64(v.V))
				}
			}
		}
		if p.calls.handle(e) {
			add(e)
		}
	}
}

func (p *pySession) stats() *PyStats {
	if p == nil {
		return nil
	}
	st := p.calls.Stats
	st.Replaced = p.replaced
	if p.late != nil {
		st.Matched, st.Unmatched, st.AcceptedDrafts = p.late.Matched, p.late.Unmatched, p.late.Drafts
	}
	return &st
}

func (p *pySession) close() {
	if p != nil {
		p.proc.Close()
	}
}
