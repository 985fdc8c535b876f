package loader

import (
	"errors"
	"fmt"
	"strings"
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
	// Program is what watch_hit reads at each call's pop; nil when the
	// stage reads nothing there. NotCompiled says why a stage that reads
	// something is read from user space instead.
	Program     *PyProgram
	NotCompiled string
	// Degraded says what the stage gives up on this interpreter rather
	// than refuse the attach (3.10: a verify's counts from its return).
	Degraded string
}

// UserReads tells whether user space reads this stage's values from the
// target while its calls run (a path the BPF reader cannot express).
func (t PyTarget) UserReads() bool { return t.Program == nil && t.NotCompiled != "" }

// Reads says where the stage's values are read, for attach and probes
// check: "" when it reads none.
func (t PyTarget) Reads() string {
	r := t.reads()
	if t.Degraded != "" {
		r = strings.TrimPrefix(r+"; ", "; ") + t.Degraded
	}
	return r
}

func (t PyTarget) reads() string {
	switch {
	case t.Program != nil:
		var paths []string
		for _, f := range t.Program.Fields {
			paths = append(paths, f.Path)
		}
		return "reads " + strings.Join(paths, ", ") + " at each return, in the watchpoint program"
	case t.UserReads():
		return "reads its values from user space while calls run, which a short call can outrun: " + t.NotCompiled
	}
	return ""
}

// wake: the hits at which user space reads the target (tracer/python.go).
func (t PyTarget) wake() Wake {
	switch {
	case !t.UserReads():
		return 0
	case t.ReadFrom != nil:
		return WakeExit
	case t.Stage.Requests != nil:
		return WakeEntry
	}
	return 0
}

// ResolvePython finds the code object of every Python stage of spec and
// compiles what it reads. Engines import their workers lazily, so a module
// not imported yet is waited for, up to wait.
func ResolvePython(proc *pyproc.Process, spec *probes.Spec, wait time.Duration) ([]PyTarget, error) {
	var out []PyTarget
	deadline := time.Now().Add(wait)
	for _, name := range probes.ProbedStages {
		st := spec.Stages[name]
		if st == nil || !st.IsPython() {
			continue
		}
		for {
			t, notYet, err := findPyTarget(proc, st)
			if notYet && time.Now().Before(deadline) {
				// A module appears in sys.modules before its body has run.
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if err != nil {
				return nil, stageError(spec, st, err)
			}
			out = append(out, t)
			break
		}
	}
	return out, nil
}

// findPyTarget finds a Python stage's code object (and its read_from's)
// and compiles what it reads; notYet says the module or the function is
// not there yet (an engine still loading).
func findPyTarget(proc *pyproc.Process, st *probes.Stage) (t PyTarget, notYet bool, err error) {
	code, err := proc.FindCode(st.Module, st.Qualname)
	var missingModule *pyproc.ModuleNotFoundError
	var noAttr *pyproc.AttributeError
	if errors.As(err, &missingModule) || errors.As(err, &noAttr) {
		return t, true, err
	}
	if err != nil {
		return t, false, err
	}
	if code.Suspends() {
		return t, false, fmt.Errorf("%s.%s is a generator or coroutine: a watchpoint sees its creation and destruction, not its runs, so it cannot be traced as a stage", st.Module, st.Qualname)
	}
	if code.Immortal {
		return t, false, fmt.Errorf("the code object of %s.%s is immortal (never reference-counted), so calls to it cannot be seen", st.Module, st.Qualname)
	}
	t = PyTarget{Stage: st, Code: code}
	if st.ReadFrom != "" {
		if t.ReadFrom, err = proc.FindCode(st.Module, st.ReadFrom); err != nil {
			return t, false, fmt.Errorf("read_from: %w", err)
		}
	}
	if err := compileTarget(proc, &t); err != nil {
		var missing *MissingNameError
		if !errors.As(err, &missing) {
			err = fmt.Errorf("%s.%s: %w", st.Module, st.Qualname, err)
		}
		return t, false, err
	}
	return t, false, nil
}

// stageError names the spec file and the stage in an error about it (a
// MissingNameError names the stage and its function itself).
func stageError(spec *probes.Spec, st *probes.Stage, err error) error {
	var missing *MissingNameError
	if errors.As(err, &missing) {
		return fmt.Errorf("%s: %w", spec.File, err)
	}
	return fmt.Errorf("%s: stage %s: %w", spec.File, st.Name, err)
}

// compileTarget compiles what t reads for the BPF reader. A path it cannot
// express leaves t.NotCompiled saying why; a name the code does not have is
// an error (the spec does not fit the program).
func compileTarget(proc *pyproc.Process, t *PyTarget) error {
	code, err := proc.CodeSlots(t.Code.Addr)
	if err != nil {
		return err
	}
	in := PyCompileInput{Stage: t.Stage, Traits: proc.Version().Traits(), Code: code, Hash: proc.NameHash}
	if t.ReadFrom != nil {
		if in.Caller, err = proc.CodeSlots(t.ReadFrom.Addr); err != nil {
			return err
		}
		in.CallerAddr = t.ReadFrom.Addr
	}
	st, err := ResolveArgs(t.Stage, code, in.Caller, t.Stage.ReadFrom)
	if err != nil {
		return err
	}
	if in.Traits.ArgsInCaller {
		if kept, ok := withoutReturnReads(st); ok {
			st = kept
			t.Degraded = "on CPython 3.10 a return value cannot be read (the frame is cleared before its code is released): its spans carry no accepted counts"
		}
	}
	t.Stage, in.Stage = st, st
	if name, err := proc.CodeName(t.Code.Addr); err == nil {
		if err := proc.CheckNameHash(name); err != nil {
			t.NotCompiled = err.Error()
			return nil
		}
	}
	p, err := CompilePython(in)
	var missing *MissingNameError
	switch {
	case errors.As(err, &missing):
		return err
	case err != nil:
		t.NotCompiled = err.Error()
	case p != nil:
		// 3.10: a call whose stack shows neither (a bound method called
		// with keywords) is checked against them.
		p.Prog.Func, p.Prog.Owner = t.Code.Func, t.Code.Owner
		t.Program = p
	}
	if t.Program == nil && t.Stage.Name == probes.Verify && t.Stage.Accepted != nil {
		return fmt.Errorf("a verify's own accepted counts are read at the trap of its return, which cannot read %s: %s", t.Stage.Accepted.Path, t.NotCompiled)
	}
	return nil
}

// withoutReturnReads is st without the counts it reads from its return
// value, and whether it had any.
func withoutReturnReads(st *probes.Stage) (*probes.Stage, bool) {
	fromReturn := func(l *probes.PyList) bool {
		return l != nil && (l.Arg == ReturnArg || l.Sub != nil && l.Sub.Arg == ReturnArg)
	}
	if !fromReturn(st.Accepted) && !fromReturn(st.Drafted) {
		return st, false
	}
	kept := *st
	kept.Accepted, kept.Drafted = nil, nil
	return &kept, true
}

// ArmPython watches each Python target's code object on every thread; their
// sites follow the native ones. proc gives the interpreter's version, its
// layouts and its threads' states (SetThreadState adds later threads).
func (s *Session) ArmPython(targets []PyTarget, proc *pyproc.Process) error {
	if len(targets) > 0 {
		if !s.opts.Python {
			return errors.New("Python stages on a session attached without Options.Python: its watchpoint programs are stubs")
		}
		if err := WatchpointsFire(); err != nil {
			return err
		}
	}
	v := proc.Version()
	threads, _ := proc.Threads()
	for _, t := range threads {
		if t.TID > 0 {
			_ = s.SetThreadState(uint32(t.TID), t.Addr, proc.ExceptionSlot(t))
		}
	}
	var sym *Symbolizer
	if len(targets) > 0 {
		// Symbols of the interpreter tell frame pushes and pops from other
		// writes to a code object's reference count.
		sym, _ = NewSymbolizer(s.PID)
	}
	s.hits = newWatchDecoder(nil)
	if sym != nil {
		s.hits.namer = sym
	}
	tr := v.Traits()
	s.hits.frameObjectOwnsCode, s.hits.popsCurrentFrame = tr.FrameObjectOwnsCode, tr.PopsCurrentFrame
	if err := s.setFrameLayout(proc.Layout(), sym); err != nil {
		return err
	}
	if len(targets) > 0 {
		s.armKeptReturns(proc)
	}
	compiled := false
	for _, t := range targets {
		compiled = compiled || t.Program != nil
	}
	if compiled {
		if err := s.setTrapLayout(proc); err != nil {
			return err
		}
	}
	for _, t := range targets {
		site := uint32(len(s.Targets) + len(s.PyTargets))
		if t.Program != nil {
			if err := s.objs.Pyprogs.Put(site, &t.Program.Prog); err != nil {
				return fmt.Errorf("stage %s: loading its reads: %w", t.Stage.Name, err)
			}
			s.programs[site] = t.Program
		}
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
		out = append(out, spanbuilder.Site{Stage: t.Stage.Name, Batch: true, Boundary: t.Stage.BoundaryName()})
	}
	return out
}

// disarmSite stops watching a site whose code object was freed, and tells
// OnCodeFreed (a reload or a replaced function may have made a new one).
func (s *Session) disarmSite(site uint32) {
	s.hits.forget(site)
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
// one was freed, compiling its reads again (its slots may differ).
func (s *Session) RearmPython(site int, code *pyproc.Code, proc *pyproc.Process) error {
	t, ok := s.PySite(site)
	if !ok {
		return fmt.Errorf("site %d is not a Python stage", site)
	}
	nt := PyTarget{Stage: t.Stage, Code: code, ReadFrom: t.ReadFrom}
	if err := compileTarget(proc, &nt); err != nil {
		return err
	}
	if nt.Program != nil {
		if err := s.objs.Pyprogs.Put(uint32(site), &nt.Program.Prog); err != nil {
			return err
		}
		s.programs[uint32(site)] = nt.Program
	} else {
		delete(s.programs, uint32(site))
		_ = s.objs.Pyprogs.Put(uint32(site), &bpf.StagePyprog{})
	}
	if _, err := s.ArmWatch(code.Addr, uint32(site), code.Refcnt, nt.wake()); err != nil {
		return err
	}
	*t = nt
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

// ForgetThread drops what watch_hit keeps for a thread that has exited:
// the kernel gives its ID to new threads, which must not read the dead
// thread's state, and the maps hold 16,384 threads.
func (s *Session) ForgetThread(tid uint32) {
	_ = s.objs.Tstates.Delete(tid)  // absent: nothing to drop
	_ = s.objs.ExcSlots.Delete(tid) // absent where the thread had no slot
}

// setFrameLayout gives watch_hit the offsets to walk a thread's frames.
func (s *Session) setFrameLayout(l pyproc.Layout, sym *Symbolizer) error {
	cfg := bpf.StagePyframeLayout{
		TstateFrame: l.TstateFrame, CframeCurrent: l.CFrameCurrent,
		FrameCode: l.FrameCode, FramePrevious: l.FramePrevious, CodeTagBits: l.FrameCodeTagBits,
		Enabled: 1,
	}
	if l.Version.Traits().ExcIsObject {
		cfg.ExcIsObject = 1
	}
	// Where no symbol names the functions that take a reference to a code
	// object without a call (a build without its full symbol table:
	// func_get_code is static, so only .symtab names it; Debian trixie's
	// 3.13 exports the frame functions in .dynsym and nothing else), a +1
	// cannot be told from a push by its place: count frames there too.
	if sym == nil || !sym.Has("func_get_code") {
		cfg.WalkEntries = 1
	}
	return s.objs.Pyframes.Put(uint32(0), &cfg)
}

// setTrapLayout gives watch_hit what it needs to read at a trap.
func (s *Session) setTrapLayout(proc *pyproc.Process) error {
	t, err := proc.TrapLayout()
	if err != nil {
		return err
	}
	l := t.Layout
	cfg := bpf.StagePylayout{
		TstatePtr: t.TstatePtr, GilPtr: t.GILPtr, GilHolder: t.GILHolder,
		TsNativeTid: l.TstateNativeThreadID, TsDatastackTop: l.TstateDatastackTop, TsFrame: l.TstateFrame,
		FrCode: l.FrameCode, FrPrevious: l.FramePrevious, FrLocalsplus: l.FrameLocalsplus, FrInstr: l.FrameInstr,
		FrValuestack: l.FrameValuestack, FrLasti: l.FrameLasti,
		CoCode: l.CodeCode, CoStacksize: l.CodeStacksize, CoNlocals: l.CodeNLocals, CoConsts: l.CodeConsts,
		BytesData: l.BytesData,
		TpFlags:   l.TypeFlags, TpBasicsize: l.TypeBasicSize, TpDictoffset: l.TypeDictOffset,
		TpMro: l.TypeMro, TpDict: l.TypeDict, HtCachedKeys: l.TypeCachedKeys,
		AsciiData: l.ASCIIData, CompactData: l.CompactData,
		FuncCode: l.FuncCode, ImFunc: l.WrapperCallable, ImSelf: l.WrapperCallable + 8,
		FuncDefaults: l.FuncDefaults, FuncKwdefaults: l.FuncKwDefaults,
		MdDef: l.MemberDescrDef, MdefType: l.MemberDefType, MdefOffset: l.MemberDefOffset,
		T_list: t.Types.List, T_tuple: t.Types.Tuple, T_dict: t.Types.Dict, T_str: t.Types.Str,
		T_long: t.Types.Long, T_bool: t.Types.Bool, T_function: t.Types.Function, T_method: t.Types.Method,
		T_member: t.Types.Member, T_cell: t.Types.Cell, T_property: t.Types.Property, T_getset: t.Types.GetSet,
		None:  t.Types.None,
		NsDev: t.NSDev, NsIno: t.NSIno,
		Minor: uint8(t.Minor), Enabled: 1,
		OpReturn: t.OpReturn, OpReturnInstr: t.OpReturnInstrumented,
		OpCallFunction: t.OpCallFunction, OpCallMethod: t.OpCallMethod, OpCallKw: t.OpCallKW,
		OpCallEx: t.OpCallEx, OpExtendedArg: t.OpExtArg, OpLoadConst: t.OpLoadConst,
		CoNlocalsplus: l.CodeNLocalsPlus, FrFuncobj: l.FrameFuncObj,
	}
	tr := l.Version.Traits()
	for _, op := range tr.PushCalls {
		cfg.Callops[op>>3] |= 1 << (op & 7)
	}
	cfg.OpKwNames, cfg.KwBack = tr.KWNames, tr.KWBack
	cfg.OpKwCall, cfg.OpKwCallInstr = tr.KWCalls[0], tr.KWCalls[1]
	if tr.SelfAbove {
		cfg.SelfAbove = 1
	}
	if l.LongTagged {
		cfg.LongTagged = 1
	}
	return s.objs.Pylayouts.Put(uint32(0), &cfg)
}
