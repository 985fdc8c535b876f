package pyproc

import (
	"fmt"
	"syscall"
)

// What the watchpoint program needs to read a stage call's values at the
// trap of its frame pop (bpf/pyread.h): where the running thread's state is,
// the offsets it reads by, the built-in types it compares with, and per code
// object the slots of its arguments.

// TrapLayout is the interpreter's side of the BPF reader's configuration.
type TrapLayout struct {
	Minor int
	// The running thread's state: *TstatePtr (3.10, 3.11), or the holder at
	// GILHolder in the GIL *GILPtr points to (3.12+). Both are absolute.
	TstatePtr, GILPtr, GILHolder uint64
	Layout                       Layout
	Types                        TrapTypes
	// Opcodes of the returning and calling instructions (3.10's calls: the
	// caller's instruction tells where the callee's arguments are).
	OpReturn, OpReturnInstrumented                             uint8
	OpCallFunction, OpCallMethod, OpCallKW, OpCallEx, OpExtArg uint8
	OpLoadConst                                                uint8
	// The target's PID namespace, when it is not ours: thread ids in the
	// interpreter's state are numbered there.
	NSDev, NSIno uint64
}

// TrapTypes are the addresses of the built-in types (and None) the reader
// compares objects' types with.
type TrapTypes struct {
	List, Tuple, Dict, Str, Long, Bool, Function, Method, Member, Cell, Property, GetSet, None uint64
}

// opcodeNames are opcodes' entries, as Lib/opcode.py names them.
var opcodeNames = [8]string{"RETURN_VALUE", "INSTRUMENTED_RETURN_VALUE", "CALL_FUNCTION", "CALL_METHOD",
	"CALL_FUNCTION_KW", "CALL_FUNCTION_EX", "EXTENDED_ARG", "LOAD_CONST"}

// TrapLayout describes the interpreter for reads at a watchpoint trap.
func (p *Process) TrapLayout() (TrapLayout, error) {
	l := p.layout
	v := l.Version
	tr := v.Traits()
	if !tr.TrapReads {
		return TrapLayout{}, fmt.Errorf("%w: reads at the trap know CPython 3.10 to 3.13, not %s", ErrUnsupported, v)
	}
	ops := tr.Opcodes
	t := TrapLayout{Minor: tr.Minor, Layout: l}
	switch {
	case l.RuntimeTstateCurrent != 0:
		t.TstatePtr = p.runtime + l.RuntimeTstateCurrent
	case l.InterpGIL != 0:
		interp, err := p.mainInterp()
		if err != nil {
			return TrapLayout{}, err
		}
		t.GILPtr, t.GILHolder = interp+l.InterpGIL, l.GILHolder
	default:
		return TrapLayout{}, fmt.Errorf("CPython %s: no way to find the running thread's state", v)
	}
	t.OpReturn, t.OpReturnInstrumented = ops[0], ops[1]
	t.OpCallFunction, t.OpCallMethod, t.OpCallKW, t.OpCallEx, t.OpExtArg = ops[2], ops[3], ops[4], ops[5], ops[6]
	t.OpLoadConst = ops[7]
	ty := p.types
	t.Types = TrapTypes{List: ty.list, Tuple: ty.tuple, Dict: ty.dict, Str: ty.str, Long: ty.long, Bool: ty.boolean,
		Function: ty.function, Method: ty.method, Member: ty.member, Cell: ty.cell, Property: ty.property,
		GetSet: ty.getset, None: ty.none}
	if ty.list == 0 || ty.tuple == 0 || ty.dict == 0 || ty.str == 0 || ty.long == 0 {
		return TrapLayout{}, fmt.Errorf("CPython %s in %s: the built-in types list, tuple, dict, str and int are not all exported", v, p.Path)
	}
	if p.Pid != 0 {
		t.NSDev, t.NSIno = otherPIDNamespace(p.Pid)
	}
	return t, nil
}

// otherPIDNamespace is the device and inode of pid's PID namespace, or
// zeros when it is ours.
func otherPIDNamespace(pid int) (dev, ino uint64) {
	var theirs, ours syscall.Stat_t
	if syscall.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid), &theirs) != nil || syscall.Stat("/proc/self/ns/pid", &ours) != nil {
		return 0, 0
	}
	if theirs.Ino == ours.Ino && theirs.Dev == ours.Dev {
		return 0, 0
	}
	return theirs.Dev, theirs.Ino
}

// CodeSlots is what the reader needs of a stage's code object.
type CodeSlots struct {
	// Names of the local slots in order: the arguments first (self,
	// batch, …), then other locals, cells and free variables; Cell marks
	// the slots that hold a cell (3.11+).
	Names    []string
	Cell     []bool
	NameAddr []uint64 // the name objects (interned strs)
	ArgCount int      // positional parameters (co_argcount)
	// The first PosOnlyArgCount of them cannot be passed by keyword.
	PosOnlyArgCount int
	// The parameters after them in Names: keyword-only ones
	// (co_kwonlyargcount), then *args and **kwargs where the function has
	// them (CO_VARARGS, CO_VARKEYWORDS).
	KwOnlyArgCount       int
	VarArgs, VarKeywords bool
	// The positional arguments' names (co_varnames[:co_argcount]): on
	// 3.10 the reader finds arguments by position on the caller's stack.
	NLocalsPlus int
	// FrameBytes is the size of the call's frame on the thread's data
	// stack (3.11+): at the pop the frame starts this far below its top.
	FrameBytes uint64
}

// Params is how many of Names are the function's parameters.
func (c *CodeSlots) Params() int {
	n := c.ArgCount + c.KwOnlyArgCount
	if c.VarArgs {
		n++
	}
	if c.VarKeywords {
		n++
	}
	return n
}

// Code flags (CPython's Include/cpython/code.h).
const (
	coVarArgs     = 0x4
	coVarKeywords = 0x8
)

// frameSpecials311 is 3.11's _PyInterpreterFrame before localsplus, in
// words: (sizeof(_PyInterpreterFrame) - 1) / sizeof(PyObject *).
const frameSpecials311 = 9

// CodeSlots reads a code object's local names, cell kinds and sizes.
func (p *Process) CodeSlots(code uint64) (*CodeSlots, error) {
	l := &p.layout
	hdr, err := p.codeHeader(code)
	if err != nil {
		return nil, err
	}
	names, err := p.localNameTuples(code)
	if err != nil {
		return nil, err
	}
	cs := &CodeSlots{ArgCount: int(int32(hdr.u32(l.CodeArgcount)))}
	nvar := len(names) // 3.10: cells and free variables follow co_varnames
	if l.CodeNLocals != 0 {
		nvar = int(int32(hdr.u32(l.CodeNLocals)))
	}
	for i, n := range names {
		s, err := p.readStr(n)
		if err != nil {
			return nil, fmt.Errorf("code %#x: local name %d: %w", code, i, err)
		}
		cs.Names = append(cs.Names, s)
		cs.NameAddr = append(cs.NameAddr, n)
		cs.Cell = append(cs.Cell, p.isCellSlot(code, i) || i >= nvar)
	}
	flags := hdr.u32(l.CodeFlags)
	cs.KwOnlyArgCount = int(int32(hdr.u32(l.CodeKwOnlyArgcount)))
	cs.PosOnlyArgCount = int(int32(hdr.u32(l.CodePosOnlyArgcount)))
	cs.VarArgs, cs.VarKeywords = flags&coVarArgs != 0, flags&coVarKeywords != 0
	if cs.ArgCount < 0 || cs.KwOnlyArgCount < 0 || cs.PosOnlyArgCount < 0 || cs.PosOnlyArgCount > cs.ArgCount || cs.Params() > len(names) {
		return nil, fmt.Errorf("code %#x: co_argcount %d, co_kwonlyargcount %d, flags %#x with %d local names", code, cs.ArgCount, cs.KwOnlyArgCount, flags, len(names))
	}
	if l.CodeNLocalsPlus == 0 {
		return cs, nil // 3.10: arguments are read from the caller
	}
	b, err := p.m.block(code, int(max(l.CodeNLocalsPlus, l.CodeStacksize, l.CodeFramesize)+4))
	if err != nil {
		return nil, err
	}
	cs.NLocalsPlus = int(int32(b.u32(l.CodeNLocalsPlus)))
	if cs.NLocalsPlus != len(names) {
		return nil, fmt.Errorf("code %#x: co_nlocalsplus %d but %d local names", code, cs.NLocalsPlus, len(names))
	}
	words := uint64(b.u32(l.CodeFramesize))
	if l.CodeFramesize == 0 {
		words = uint64(cs.NLocalsPlus) + uint64(b.u32(l.CodeStacksize)) + frameSpecials311
	}
	if words == 0 || words > 1<<20 {
		return nil, fmt.Errorf("code %#x: frame of %d words", code, words)
	}
	cs.FrameBytes = 8 * words
	return cs, nil
}

// NameHash is the hash the target gives the str s (dict lookups compare
// it). It fails when the hashes pyproc computes do not match the target's
// (an interpreter built with another hash), checked on a str the target
// hashed itself.
func (p *Process) NameHash(s string) (uint64, error) {
	if p.hashOK < 0 {
		return 0, fmt.Errorf("this interpreter's str hashes differ from pyproc's: dict lookups at the trap cannot be made")
	}
	return uint64(p.strHash(s)), nil
}

// CheckNameHash compares NameHash of the str at addr (one the target has
// hashed: an attribute or function name) with the hash cached in it.
func (p *Process) CheckNameHash(addr uint64) error {
	b, err := p.m.block(addr, 0x28)
	if err != nil {
		return err
	}
	cached := int64(b.u64(p.layout.UnicodeHash))
	if cached == -1 {
		return nil // not hashed yet: nothing to compare
	}
	s, err := p.readStr(addr)
	if err != nil {
		return err
	}
	if p.strHash(s) != cached {
		p.hashOK = -1
		return fmt.Errorf("the target hashed %q to %#x, pyproc to %#x: its str hash is not the one pyproc knows", s, cached, p.strHash(s))
	}
	return nil
}

// CodeName is the address of a code object's co_name str, for CheckNameHash.
func (p *Process) CodeName(code uint64) (uint64, error) {
	return p.m.ptr(code + p.layout.CodeName)
}

// PathStep is one component of an object path, as Eval reads it.
type PathStep struct {
	Attr  string // .name
	Key   string // ["key"]
	IsKey bool
	Index int  // [n]
	All   bool // [*]
	Text  string
}

// ParsePath splits an object path the way Eval does.
func ParsePath(path string) ([]PathStep, error) {
	steps, err := parsePath(path)
	if err != nil {
		return nil, err
	}
	out := make([]PathStep, len(steps))
	for i, s := range steps {
		out[i] = PathStep{Attr: s.attr, Key: s.key, IsKey: s.isKey, Index: s.index, All: s.all, Text: s.text}
	}
	return out, nil
}
