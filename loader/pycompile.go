package loader

import (
	"errors"
	"fmt"
	"strings"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
)

// What a Python stage reads (its requests, its when, its accepted counts) is
// compiled once, at attach, into a program of offsets and steps that
// watch_hit runs at the pop of each call (bpf/pyread.h). A path the program
// cannot express is read from user space instead, and attach says so.

// PyRole says what a field of a Python stage's reads is for.
type PyRole uint8

const (
	RoleRequests PyRole = iota // the request ids the call served
	RoleWhen                   // the value its when compares
	RoleAccepted               // accepted counts, index-aligned with the requests
	RoleDrafted                // the requests that had drafts
	RoleSub                    // the number taken from each accepted count
)

// PyField is one compiled read, for decoding and messages.
type PyField struct {
	Role  PyRole
	Path  string   // as the spec wrote it: batch.reqs[*].rid
	Steps []string // each step's text, for saying where a read failed
}

// Where tells where in f's path a read failed: "batch" (the root), or the
// path up to the failing step (batch.reqs[*]).
func (f PyField) Where(e *PyReadError) string {
	if len(f.Steps) == 0 {
		return f.Path
	}
	if e == nil || e.Step < 0 || e.Step+2 > len(f.Steps) {
		return f.Steps[0]
	}
	return strings.Join(f.Steps[:e.Step+2], "")
}

// PyProgram is a stage's reads as the BPF reader runs them.
type PyProgram struct {
	Prog   bpf.StagePyprog
	Fields []PyField
}

// Limits of the BPF reader (bpf/pyread.h).
const (
	pyMaxFields = int(bpf.StagePyLimitPY_MAX_FIELDS)
	pyMaxSteps  = int(bpf.StagePyLimitPY_MAX_STEPS)
	pyMaxNames  = int(bpf.StagePyLimitPY_MAX_NAMES)
	pyNameLen   = int(bpf.StagePyLimitPY_NAME_LEN)
	pyStrMax    = int(bpf.StagePyLimitPY_STR_MAX)
)

// Root kinds and step ops of bpf/pyread.h.
const (
	pyRootArg    = uint8(bpf.StagePyRootPY_ROOT_ARG)
	pyRootReturn = uint8(bpf.StagePyRootPY_ROOT_RETURN)
	pyRootCaller = uint8(bpf.StagePyRootPY_ROOT_CALLER)

	pyOpAttr    = uint8(bpf.StagePyOpPY_ATTR)
	pyOpIndex   = uint8(bpf.StagePyOpPY_INDEX)
	pyOpKey     = uint8(bpf.StagePyOpPY_KEY)
	pyOpIter    = uint8(bpf.StagePyOpPY_ITER)
	pyOpIterSeq = uint8(bpf.StagePyOpPY_ITER_SEQ)
	pyOpLen     = uint8(bpf.StagePyOpPY_LEN)

	pyfLen     = uint8(bpf.StagePyFieldFlagPYF_LEN)
	pyfIterSeq = uint8(bpf.StagePyFieldFlagPYF_ITER_SEQ)

	pyArgPos     = uint8(bpf.StagePyArgkindPYA_POS) // positional or keyword
	pyArgPosOnly = uint8(bpf.StagePyArgkindPYA_POSONLY)
	pyArgKwOnly  = uint8(bpf.StagePyArgkindPYA_KWONLY)
)

// ReturnArg names a stage's return value where a spec names an argument.
const ReturnArg = probes.ReturnArg

// PyCompileInput is what compiling a stage's reads needs to know.
type PyCompileInput struct {
	Stage      *probes.Stage
	Traits     pyproc.Traits     // the interpreter's
	Code       *pyproc.CodeSlots // the stage's code object
	Caller     *pyproc.CodeSlots // read_from's code object, if any
	CallerAddr uint64
	Hash       func(string) (uint64, error) // the target's str hash
}

// CompilePython compiles what a Python stage reads; nil when it reads
// nothing. An error says why the BPF reader cannot read it (user space
// then does, racing the call).
func CompilePython(in PyCompileInput) (*PyProgram, error) {
	st, err := ResolveArgs(in.Stage, in.Code, in.Caller, in.Stage.ReadFrom)
	if err != nil {
		return nil, err
	}
	in.Stage = st
	c := &pyCompiler{in: in, out: &PyProgram{}}
	if r := st.Requests; r != nil {
		fromCaller := st.ReadFrom != ""
		if err := c.field(RoleRequests, r.Arg, r.Path, r.ID, fromCaller, true, false); err != nil {
			return nil, err
		}
	}
	if w := st.When; w != nil {
		if err := c.field(RoleWhen, w.Arg, w.Path, "", false, false, false); err != nil {
			return nil, err
		}
	}
	if a := st.Accepted; a != nil {
		if err := c.field(RoleAccepted, a.Arg, a.Path, "", st.ReadFrom != "", false, a.Len); err != nil {
			return nil, err
		}
		if b := a.Sub; b != nil {
			if err := c.field(RoleSub, b.Arg, b.Path, "", st.ReadFrom != "", false, false); err != nil {
				return nil, err
			}
		}
	}
	if d := st.Drafted; d != nil {
		if err := c.field(RoleDrafted, d.Arg, d.Path, "", st.ReadFrom != "", false, false); err != nil {
			return nil, err
		}
	}
	if len(c.out.Fields) == 0 {
		return nil, nil
	}
	p := &c.out.Prog
	p.Nfields = uint32(len(c.out.Fields))
	if in.Code != nil {
		p.FrameBytes = uint32(in.Code.FrameBytes)
		p.Nlocalsplus = uint32(in.Code.NLocalsPlus)
		p.Nargs = uint32(in.Code.ArgCount)
	}
	if len(in.Traits.PushCalls) > 0 {
		// Positional parameters are read at the push too, where they are
		// temporaries the pop finds freed (py_frame_push).
		for _, f := range p.Fields[:p.Nfields] {
			if f.Root == pyRootArg && uint32(f.Slot) < p.Nargs {
				p.Push = 1
			}
		}
	}
	p.CallerCode = in.CallerAddr
	return c.out, nil
}

type pyCompiler struct {
	in    PyCompileInput
	out   *PyProgram
	names []string
}

// field compiles arg.path(.id): ids says the path names requests (a list of
// them or one; without [*], a list is walked when there is one), fromCaller
// reads arg in the caller's frame (read_from), length takes each value's len.
func (c *pyCompiler) field(role PyRole, arg, path, id string, fromCaller, ids, length bool) error {
	if len(c.out.Fields) == pyMaxFields {
		return fmt.Errorf("more than %d values to read", pyMaxFields)
	}
	full := joinPath(arg, path, id)
	var f bpf.StagePyfield
	if err := c.root(&f, arg, fromCaller); err != nil {
		var missing *MissingNameError
		if errors.As(err, &missing) {
			return err
		}
		return fmt.Errorf("%s: %w", full, err)
	}
	steps, err := pathSteps(&f, full, path, id, ids, length)
	if err != nil {
		return err
	}
	if err := c.encodeSteps(&f, full, steps, length); err != nil {
		return err
	}
	f.Nsteps = uint8(len(steps))
	f.Maxstr = uint8(pyStrMax)
	texts := stepTexts(arg, steps)
	c.out.Prog.Fields[len(c.out.Fields)] = f
	c.out.Fields = append(c.out.Fields, PyField{Role: role, Path: full, Steps: texts})
	return nil
}

// pathSteps parses path and id into the steps the reader takes, and sets
// f's walk: its [*] (f.Iter, or pyMaxSteps for none), a walk of a list of
// requests where ids gives no [*] (pyfIterSeq), the length (pyfLen).
func pathSteps(f *bpf.StagePyfield, full, path, id string, ids, length bool) ([]pyproc.PathStep, error) {
	steps, err := pyproc.ParsePath(path)
	if err != nil {
		return nil, err
	}
	iter := -1
	for i, s := range steps {
		if s.All {
			if iter >= 0 {
				return nil, fmt.Errorf("%s: more than one [*]", full)
			}
			iter = i
		}
	}
	if ids && iter < 0 {
		// A list of requests (or ids) is walked; one request is itself.
		steps = append(steps, pyproc.PathStep{All: true})
		iter = len(steps) - 1
		f.Flags |= pyfIterSeq
	}
	if id != "" {
		more, err := pyproc.ParsePath(id)
		if err != nil {
			return nil, err
		}
		for _, s := range more {
			if s.All {
				return nil, fmt.Errorf("%s: [*] in a request's id", full)
			}
		}
		steps = append(steps, more...)
	}
	if length {
		steps = append(steps, pyproc.PathStep{Text: "len"})
		f.Flags |= pyfLen
	}
	if len(steps) > pyMaxSteps {
		return nil, fmt.Errorf("%s: %d steps, more than %d", full, len(steps), pyMaxSteps)
	}
	f.Iter = uint8(pyMaxSteps)
	if iter >= 0 {
		f.Iter = uint8(iter)
	}
	return steps, nil
}

// encodeSteps writes each step's op (and its name's index, or its index)
// into f.
func (c *pyCompiler) encodeSteps(f *bpf.StagePyfield, full string, steps []pyproc.PathStep, length bool) error {
	for i, s := range steps {
		st := &f.Steps[i]
		switch {
		case s.Text == "len" && i == len(steps)-1 && length:
			st.Op = pyOpLen
		case s.All:
			st.Op = pyOpIter
			if f.Flags&pyfIterSeq != 0 && i == int(f.Iter) {
				st.Op = pyOpIterSeq
			}
		case s.Attr != "":
			st.Op = pyOpAttr
		case s.IsKey:
			st.Op = pyOpKey
		default:
			st.Op = pyOpIndex
			st.Index = int32(s.Index)
		}
		if st.Op == pyOpAttr || st.Op == pyOpKey {
			name := s.Attr
			if st.Op == pyOpKey {
				name = s.Key
			}
			ix, err := c.name(name)
			if err != nil {
				return fmt.Errorf("%s: %w", full, err)
			}
			st.Name = uint8(ix)
		}
	}
	return nil
}

// stepTexts is each step's text after arg's, for saying where a read failed.
func stepTexts(arg string, steps []pyproc.PathStep) []string {
	texts := []string{arg}
	for _, s := range steps {
		t := s.Text
		switch {
		case t == "len":
			t = " (its length)"
		case s.All && t == "":
			t = "[*]"
		}
		texts = append(texts, t)
	}
	return texts
}

// root says where arg is at the pop: a slot of the returning frame (3.11+),
// an argument the caller passed (3.10), the return value, or a local of the
// caller (read_from).
func (c *pyCompiler) root(f *bpf.StagePyfield, arg string, fromCaller bool) error {
	in := c.in
	if arg == ReturnArg {
		if fromCaller {
			return fmt.Errorf("the return value is the stage's own, not its caller's")
		}
		if in.Traits.ArgsInCaller {
			// frame_dealloc may drop the code before it parks the frame,
			// and then nothing at the trap leads to the returned value.
			return fmt.Errorf("a return value can be read on CPython 3.11 and later, not 3.10")
		}
		f.Root = pyRootReturn
		return nil
	}
	code, what := in.Code, "the stage"
	if fromCaller {
		code, what = in.Caller, "the caller "+in.Stage.ReadFrom
	}
	if code == nil {
		return fmt.Errorf("no code object for %s", what)
	}
	// On 3.10 a captured argument is named twice, as an argument and as a
	// cell: the running frame holds its value in the cell.
	slot, last := -1, -1
	for i, n := range code.Names {
		if n == arg {
			if slot < 0 {
				slot = i
			}
			last = i
		}
	}
	if slot < 0 { // ResolveArgs checked every name: not reached
		return fmt.Errorf("%s has no local %s", what, arg)
	}
	switch {
	case fromCaller:
		f.Root = pyRootCaller
		slot = last
		if code.Cell[slot] {
			f.Cell = 1
		}
	case in.Traits.ArgsInCaller:
		if err := c.arg310(f, code, arg, slot); err != nil {
			return err
		}
	default:
		f.Root = pyRootArg
		if code.Cell[slot] {
			f.Cell = 1
		}
		if slot < len(code.NameAddr) {
			// A temporary passed by keyword is read at the push, found
			// by its name among the call's keyword names.
			f.Argstr = code.NameAddr[slot]
		}
	}
	f.Slot = uint16(slot)
	return nil
}

// arg310 says how the reader finds parameter slot of a returning call on
// 3.10, where the callee's frame is cleared by then: in what its caller
// passed (by position, by keyword: the name's object is compared with the
// call's keyword names, or looked up in its **kwargs dict), or else in the
// function's defaults. The *args and **kwargs parameters and other locals
// exist only in the callee's frame.
func (c *pyCompiler) arg310(f *bpf.StagePyfield, code *pyproc.CodeSlots, arg string, slot int) error {
	if slot >= code.ArgCount+code.KwOnlyArgCount {
		return fmt.Errorf("%q is not a named parameter: on CPython 3.10 only the arguments a call passes (and the defaults of those it does not) can be read at the trap", arg)
	}
	f.Root = pyRootArg
	switch {
	case slot < code.PosOnlyArgCount:
		f.Argkind = pyArgPosOnly
		return nil // by position or its default: no name needed
	case slot >= code.ArgCount:
		f.Argkind = pyArgKwOnly
	default:
		f.Argkind = pyArgPos
	}
	if slot < len(code.NameAddr) {
		f.Argstr = code.NameAddr[slot]
	}
	ix, err := c.name(arg)
	if err != nil {
		return fmt.Errorf("%q, passed by keyword: %w", arg, err)
	}
	f.Argname = uint8(ix)
	return nil
}

// name adds an attribute name or str key to the program's table.
func (c *pyCompiler) name(s string) (int, error) {
	for i, n := range c.names {
		if n == s {
			return i, nil
		}
	}
	if len(c.names) == pyMaxNames {
		return 0, fmt.Errorf("more than %d names", pyMaxNames)
	}
	if len(s) > pyNameLen {
		return 0, fmt.Errorf("name %q is longer than %d bytes", s, pyNameLen)
	}
	for _, r := range s {
		if r >= 0x80 {
			return 0, fmt.Errorf("name %q is not ASCII", s)
		}
	}
	h, err := c.in.Hash(s)
	if err != nil {
		return 0, err
	}
	ix := len(c.names)
	c.names = append(c.names, s)
	n := &c.out.Prog.Names[ix]
	n.Hash, n.Len = h, uint32(len(s))
	for i := range len(s) {
		n.S[i] = int8(s[i])
	}
	return ix, nil
}

func joinPath(arg, path, id string) string {
	out := arg
	if path != "" {
		if !strings.HasPrefix(path, "[") {
			out += "."
		}
		out += path
	}
	if id != "" {
		out += "." + id
	}
	return out
}
