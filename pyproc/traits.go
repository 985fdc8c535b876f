package pyproc

import "fmt"

// Traits is what one CPython build does differently from the others, as
// data. Every decision specprobe takes by interpreter version is taken
// here or in layout.go (the offsets); the rest of the code, in Go, reads
// the answer, and the BPF reader gets Minor (bpf/pyread.h is its one
// home). Adding a version is a row of offsets in layout.go and its case
// here.
type Traits struct {
	Minor int // 3.<Minor>
	// Supported: pyproc reads this build's objects (3.10 and later).
	Supported bool
	// TrapReads: the reads at a watchpoint trap know this version (its
	// Opcodes are known).
	TrapReads bool
	// Opcodes: RETURN_VALUE, INSTRUMENTED_RETURN_VALUE, and 3.10's
	// CALL_FUNCTION, CALL_METHOD, CALL_FUNCTION_KW, CALL_FUNCTION_EX,
	// EXTENDED_ARG, LOAD_CONST (Lib/opcode.py of each version;
	// TestTrapOpcodes checks them against every interpreter here).
	Opcodes [8]uint8
	// ArgsInCaller: 3.10 clears a returning frame's slots before it
	// releases its code, so a stage's arguments are read from what its
	// caller passed, and its return value cannot be read at the pop.
	ArgsInCaller bool
	// PopsCurrentFrame: 3.11 clears a returning frame before it stops being
	// the current one.
	PopsCurrentFrame bool
	// FrameObjectOwnsCode: from 3.12 a frame object that outlives its call
	// (a traceback, a kept sys._getframe()) takes a reference of its own to
	// the code when the call ends, and drops it in frame_dealloc: there
	// that -1 is no call's end.
	FrameObjectOwnsCode bool
	// ExcIsObject: from 3.12 a thread's exc_info holds the exception
	// itself, not a (type, value, traceback) triple.
	ExcIsObject bool
	// Immortal: from 3.12 an immortal object's 32-bit reference count is
	// negative.
	Immortal bool
	// ManagedDict is how an instance with a managed dict keeps its
	// attributes (attr.go instanceStore): 0 none (3.10); 11: values and
	// dict pointers before the object; 12: one tagged pointer there;
	// 13: a dict pointer there, else inline values after the object.
	ManagedDict int
	// DebugOffsets: the runtime publishes _Py_DebugOffsets (3.13+).
	DebugOffsets bool
	// PushCalls (3.11+): the opcodes of a caller running which a frame is
	// pushed with the arguments still on the caller's stack (CALL and its
	// specializations for Python functions, pushCallNames): a temporary
	// argument is read there (bpf/pyread.h py_frame_push). KWNames is
	// KW_NAMES, KWBack how many code units before the CALL it sits (3.11:
	// PRECALL and its cache between; 3.13 has CALL_KW instead, not a push
	// call). SelfAbove: 3.13 stacks [callable, self or NULL], 3.11 and
	// 3.12 [NULL or callable, callable or self].
	PushCalls       []uint8
	KWNames, KWBack uint8
	// KWCalls (3.13): CALL_KW and INSTRUMENTED_CALL_KW, among PushCalls:
	// their keyword names are a tuple on the stack, after the arguments.
	KWCalls   [2]uint8
	SelfAbove bool
}

// pushCallNames are PushCalls' opcodes by name, per minor version
// (TestPushCallOpcodes checks the numbers against every interpreter here).
var pushCallNames = map[int][]string{
	11: {"CALL", "CALL_ADAPTIVE", "CALL_PY_EXACT_ARGS", "CALL_PY_WITH_DEFAULTS"},
	12: {"CALL", "CALL_PY_EXACT_ARGS", "CALL_PY_WITH_DEFAULTS", "CALL_BOUND_METHOD_EXACT_ARGS", "INSTRUMENTED_CALL"},
	13: {"CALL", "CALL_PY_EXACT_ARGS", "CALL_PY_GENERAL", "CALL_BOUND_METHOD_EXACT_ARGS", "CALL_BOUND_METHOD_GENERAL", "INSTRUMENTED_CALL",
		"CALL_KW", "INSTRUMENTED_CALL_KW"},
}

var pushCalls = map[int][]uint8{
	11: {171, 22, 23, 24},
	12: {171, 23, 24, 28, 241},
	13: {53, 177, 178, 163, 164, 244, 57, 245},
}

// opcodes per minor version, in Traits.Opcodes' order.
var opcodes = map[int][8]uint8{
	10: {83, 0, 131, 161, 141, 142, 144, 100},
	11: {83, 0, 0, 0, 0, 142, 144, 100},
	12: {83, 242, 0, 0, 0, 142, 144, 100},
	13: {36, 239, 0, 0, 0, 54, 71, 83},
}

// Traits is what v does differently from other builds.
func (v Version) Traits() Traits {
	t := Traits{Minor: v.Minor}
	if v.Major != 3 {
		return t
	}
	t.Opcodes, t.TrapReads = opcodes[v.Minor]
	t.Supported = v.Minor >= 10
	t.ArgsInCaller = v.Minor == 10
	t.PopsCurrentFrame = v.Minor == 11
	t.FrameObjectOwnsCode = v.Minor >= 12
	t.ExcIsObject = v.Minor >= 12
	t.Immortal = v.Minor >= 12
	t.DebugOffsets = v.Minor >= 13
	t.PushCalls = pushCalls[v.Minor]
	switch v.Minor {
	case 11:
		t.KWNames, t.KWBack = 172, 3
	case 12:
		t.KWNames, t.KWBack = 172, 1
	}
	t.SelfAbove = v.Minor == 13
	if v.Minor == 13 {
		t.KWCalls = [2]uint8{57, 245}
	}
	switch {
	case v.Minor >= 13:
		t.ManagedDict = 13
	case v.Minor >= 11:
		t.ManagedDict = v.Minor
	}
	return t
}

// sameVersion tells whether a PY_VERSION_HEX names v's major and minor.
func (v Version) sameVersion(hex uint64) bool {
	return int(hex>>24) == v.Major && int(hex>>16&0xff) == v.Minor
}

// unsupported says why pyproc cannot read v's objects; nil where it can.
func (v Version) unsupported() error {
	if v.Traits().Supported {
		return nil
	}
	return fmt.Errorf("%w: CPython %s is not supported: pyproc reads the object layout of CPython 3.10 and later", ErrUnsupported, v)
}
