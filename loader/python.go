package loader

import (
	"errors"
	"fmt"
	"time"

	"github.com/specprobe/specprobe/bpf"

	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanbuilder"
)

// PyTarget is a Python stage found in the process: the code object to watch.
type PyTarget struct {
	Stage    *probes.Stage
	Code     *pyproc.Code
	ReadFrom *pyproc.Code // the caller whose frame an accept stage reads
}

// wake: the hits at which user space reads the target (tracer/python.go).
func (t PyTarget) wake() Wake {
	switch {
	case t.ReadFrom != nil:
		return WakeExit
	case t.Stage.Requests != nil:
		return WakeEntry
	}
	return 0
}

// ResolvePython finds the code object of every Python stage of spec. Engines
// import their workers lazily, so a module not imported yet is waited for,
// up to wait.
func ResolvePython(proc *pyproc.Process, spec *probes.Spec, wait time.Duration) ([]PyTarget, error) {
	var out []PyTarget
	deadline := time.Now().Add(wait)
	for _, name := range probes.StageNames {
		st := spec.Stages[name]
		if st == nil || !st.IsPython() {
			continue
		}
		for {
			code, err := proc.FindCode(st.Module, st.Qualname)
			var notYet *pyproc.ModuleNotFoundError
			var noAttr *pyproc.AttributeError
			if (errors.As(err, &notYet) || errors.As(err, &noAttr)) && time.Now().Before(deadline) {
				// A module appears in sys.modules before its body has run.
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s: stage %s: %w", spec.File, name, err)
			}
			if code.Suspends() {
				return nil, fmt.Errorf("%s: stage %s: %s.%s is a generator or coroutine: a watchpoint sees its creation and destruction, not its runs, so it cannot be traced as a stage", spec.File, name, st.Module, st.Qualname)
			}
			if code.Immortal {
				return nil, fmt.Errorf("%s: stage %s: the code object of %s.%s is immortal (never reference-counted), so calls to it cannot be seen", spec.File, name, st.Module, st.Qualname)
			}
			t := PyTarget{Stage: st, Code: code}
			if st.ReadFrom != "" {
				if t.ReadFrom, err = proc.FindCode(st.Module, st.ReadFrom); err != nil {
					return nil, fmt.Errorf("%s: stage %s: read_from: %w", spec.File, name, err)
				}
			}
			out = append(out, t)
			break
		}
	}
	return out, nil
}

// ArmPython watches each Python target's code object on every thread; their
// sites follow the native ones. proc gives the interpreter's version, its
// frame layout and its threads' states (SetThreadState adds later threads).
func (s *Session) ArmPython(targets []PyTarget, proc *pyproc.Process) error {
	v := proc.Version()
	threads, _ := proc.Threads()
	for _, t := range threads {
		if t.TID > 0 {
			_ = s.SetThreadState(uint32(t.TID), t.Addr, proc.ExceptionSlot(t))
		}
	}
	// From 3.12 a frame object that outlives its call (a traceback, a kept
	// sys._getframe()) takes a reference of its own to the code when the
	// call ends, and drops it in frame_dealloc: there that -1 is no call's end.
	s.frameObjectOwnsCode = v.Major == 3 && v.Minor >= 12
	if len(targets) > 0 {
		// Symbols of the interpreter tell frame pushes and pops from other
		// writes to a code object's reference count.
		s.symbolizer, _ = NewSymbolizer(s.PID)
		s.ipClasses = map[uint64]ipClass{}
		s.tentative = map[watchKey]int{}
	}
	if err := s.setFrameLayout(proc.Layout(), v); err != nil {
		return err
	}
	for _, t := range targets {
		site := uint32(len(s.Targets) + len(s.PyTargets))
		if _, err := s.ArmWatch(t.Code.Addr, site, t.Code.Refcnt, t.wake()); err != nil {
			return fmt.Errorf("stage %s (%s.%s): %w", t.Stage.Name, t.Stage.Module, t.Stage.Qualname, err)
		}
		s.PyTargets = append(s.PyTargets, t)
	}
	return nil
}

// PySite returns the Python target of a site, if it is one.
func (s *Session) PySite(site int) (*PyTarget, bool) {
	i := site - len(s.Targets)
	if i < 0 || i >= len(s.PyTargets) {
		return nil, false
	}
	return &s.PyTargets[i], true
}

func (s *Session) pySites() []spanbuilder.Site {
	var out []spanbuilder.Site
	for _, t := range s.PyTargets {
		out = append(out, spanbuilder.Site{Stage: t.Stage.Name, Batch: true})
	}
	return out
}

// disarmSite stops watching a site whose code object was freed, and tells
// OnCodeFreed (a reload or a replaced function may have made a new one).
func (s *Session) disarmSite(site uint32) {
	delete(s.refcnt, site)
	for _, w := range s.watches {
		if w.Site == site {
			s.DisarmWatch(w)
		}
	}
	if s.OnCodeFreed != nil {
		s.OnCodeFreed(int(site))
	}
}

// RearmPython watches code, the new code object of a Python site whose old
// one was freed.
func (s *Session) RearmPython(site int, code *pyproc.Code) error {
	t, ok := s.PySite(site)
	if !ok {
		return fmt.Errorf("site %d is not a Python stage", site)
	}
	for k := range s.tentative {
		if int(k.site) == site {
			delete(s.tentative, k)
		}
	}
	if _, err := s.ArmWatch(code.Addr, uint32(site), code.Refcnt, t.wake()); err != nil {
		return err
	}
	t.Code = code
	return nil
}

// SetThreadState tells watch_hit where thread tid's state is, to walk its
// frames, and where its exception being raised is (pyproc.ExceptionSlot; 0
// if unknown), so a stage call's exit says whether it raised.
func (s *Session) SetThreadState(tid uint32, tstate, excSlot uint64) error {
	if err := s.objs.Tstates.Put(tid, tstate); err != nil {
		return err
	}
	if excSlot == 0 {
		return nil
	}
	return s.objs.ExcSlots.Put(tid, excSlot)
}

// setFrameLayout gives watch_hit the offsets to walk a thread's frames.
func (s *Session) setFrameLayout(l pyproc.Layout, v pyproc.Version) error {
	cfg := bpf.StagePyframeLayout{
		TstateFrame: l.TstateFrame, CframeCurrent: l.CFrameCurrent,
		FrameCode: l.FrameCode, FramePrevious: l.FramePrevious, CodeTagBits: l.FrameCodeTagBits,
		Enabled: 1,
	}
	// 3.11 clears a returning frame before it stops being the current one.
	s.popsCurrentFrame = v.Major == 3 && v.Minor == 11
	// Where no symbol names the frame-pop functions (a stripped build), a
	// +1 cannot be told from a push by its place: count frames there too.
	stripped := true
	for _, fn := range framePop {
		if s.symbolizer != nil && s.symbolizer.Has(fn) {
			stripped = false
		}
	}
	if stripped {
		cfg.WalkEntries = 1
	}
	return s.objs.Pyframes.Put(uint32(0), &cfg)
}
