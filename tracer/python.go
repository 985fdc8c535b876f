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
	sess    *loader.Session
	log     io.Writer
	// Threads whose exception slot watch_hit knows; others are looked up
	// when they first enter a stage.
	slots     map[uint32]bool
	replaced  int  // code objects followed to their replacement
	sameBatch bool // the spec's same_batch
}

func preparePython(cfg Config, pid int, spec *probes.Spec) (*pySession, error) {
	hasPython := false
	for _, st := range spec.Stages {
		hasPython = hasPython || st.IsPython()
	}
	if !hasPython {
		return nil, nil
	}
	proc, err := pyproc.Attach(pid)
	if err != nil {
		return nil, fmt.Errorf("PID %d: %w", pid, err)
	}
	wait := cfg.ImportWait
	if wait == 0 {
		wait = 30 * time.Second
	}
	targets, err := loader.ResolvePython(proc, spec, wait)
	if err != nil {
		proc.Close()
		return nil, err
	}
	return &pySession{proc: proc, targets: targets, log: cfg.Log, sameBatch: spec.SameBatch}, nil
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
	case errors.As(err, &gone), pyproc.Exiting(err), errors.Is(err, pyproc.ErrNoInterpreter):
		// The module went with it: the interpreter is shutting down (or has
		// finalised: it was running at attach, so no interpreter now is the end).
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

// countMatching puts the late-acceptance matching in front of next when a
// process of the server has a Python accept stage (a CountMatcher decides
// which verify its counts are for) or a verify that reads its own counts:
// one for the whole server, whose verifies and accepts may run in
// different processes.
func countMatching(procs []*procTrace, next spanbuilder.Sink) (spanbuilder.Sink, *spanbuilder.LateAccept, *spanbuilder.CountMatcher) {
	var late *spanbuilder.LateAccept
	var match *spanbuilder.CountMatcher
	for _, pt := range procs {
		if pt.py == nil {
			continue
		}
		for _, t := range pt.py.targets {
			if t.Stage.Accepted != nil && late == nil {
				late = spanbuilder.NewLateAccept(next)
			}
			if t.Stage.Name == probes.Accept && match == nil {
				match = spanbuilder.NewCountMatcher(late)
			}
		}
	}
	if late == nil {
		return next, nil, nil
	}
	return late, late, match
}

// start readies the reads of calls; match is nil without an accept stage.
func (p *pySession) start(sess *loader.Session, late *spanbuilder.LateAccept, match counter) {
	if p == nil {
		return
	}
	p.calls = &pyCalls{sites: sess.PySite, match: match, late: late, typeName: p.proc.TypeName, pending: map[callKey][]pendingRead{}}
	for _, t := range p.targets {
		if t.UserReads() {
			p.calls.user = &userReads{proc: p.proc, held: map[uint32]heldCounts{}}
		}
	}
	if p.sameBatch {
		p.calls.trackSteps()
	}
}

func (p *pySession) describe(w io.Writer) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "  python %s\n", p.proc.Version())
	if p.sess != nil && p.sess.KeptFrames != "" {
		fmt.Fprintf(w, "  %-12s %s\n", "kept frames", p.sess.KeptFrames)
	}
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
		} else if e.Dropped > 0 {
			// An event that makes no span (an accept's, say) still says the
			// kernel lost the thread's events before it: the builder must
			// cut what the thread has open, so it goes on as a withdrawal.
			e.Cancel = true
			add(e)
		}
	}
}

// threads lists the threads whose state is kept, here and in watch_hit.
func (p *pySession) threads() []uint32 {
	if p == nil {
		return nil
	}
	tids := make([]uint32, 0, len(p.slots))
	for tid := range p.slots {
		tids = append(tids, tid)
	}
	return tids
}

// forget drops what is kept for a thread that has exited (at boot ns at):
// its reads even where it has no slot (a thread seen only by a call's
// return, begun before attach).
func (p *pySession) forget(tid uint32, at uint64) {
	if p == nil {
		return
	}
	if p.slots[tid] {
		delete(p.slots, tid)
		p.sess.ForgetThread(tid)
	}
	p.calls.forget(tid, at)
}

func (p *pySession) stats() *PyStats {
	if p == nil {
		return nil
	}
	st := p.calls.Stats
	st.Replaced = p.replaced
	return &st
}

// pyStats adds up the Python side of every process, with the counts
// matched; nil without Python stages.
func pyStats(procs []*procTrace, late *spanbuilder.LateAccept, match *spanbuilder.CountMatcher) *PyStats {
	var out *PyStats
	for _, pt := range procs {
		st := pt.py.stats()
		switch {
		case st == nil:
		case out == nil:
			out = st
		default:
			out.add(st)
		}
	}
	if out != nil && late != nil {
		out.Matched, out.Unmatched, out.AcceptedDrafts = late.Matched, late.Unmatched, late.Drafts
		out.GaveUp = late.GaveUp
	}
	if out != nil && match != nil {
		out.Restarts = match.Reset
	}
	return out
}

func (s *PyStats) add(o *PyStats) {
	s.Reads += o.Reads
	s.Failed += o.Failed
	s.Late += o.Late
	s.Skipped += o.Skipped
	s.FromStep += o.FromStep
	s.FromPush += o.FromPush
	s.WhenFromStep += o.WhenFromStep
	s.Retries += o.Retries
	s.MaxLag = max(s.MaxLag, o.MaxLag)
	s.SumLag += o.SumLag
	if o.LastError != "" {
		s.LastError = o.LastError
	}
	s.Replaced += o.Replaced
}

func (p *pySession) close() {
	if p != nil {
		p.proc.Close()
	}
}
