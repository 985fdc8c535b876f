package loader

import "strings"

// Where CPython pushes and pops frames: the only places a write to a code
// object's reference count means a call begins or ends. Everything else that
// touches it (reading f.__code__, a function or tuple being freed, the
// allocator reusing freed memory) is not a call. Measured on 3.10–3.13
// (integration/python_test.go); 3.12+ also push frames inline in the eval loop.
var (
	framePush = []string{"_PyFrame_New_NoTrack", "_PyFrame_Push", "_PyEvalFramePushAndInit", "_PyEval_EvalFrameDefault", "_PyFrame_PushUnchecked", "_PyEvalFramePushAndInit_Ex"}
	framePop  = []string{"frame_dealloc", "_PyFrame_Clear", "_PyEvalFrameClearAndPop", "_PyEval_FrameClearAndPop", "clear_thread_frame", "clear_gen_frame"}
	// Calls through vectorcall (func(*args, **kwargs), a decorator's wrapper
	// calling the wrapped function) push and pop in _PyEval_Vector, which
	// builds that inline both, and a stripped interpreter's only symbol for
	// it may be _PyFunction_Vectorcall (Debian 3.11): the value's direction
	// tells which.
	framePushPop = []string{"_PyEval_Vector", "_PyFunction_Vectorcall"}
)

type ipClass uint8

const (
	ipUnknown ipClass = iota // no symbol covers it (a stripped interpreter): trusted
	ipPush
	ipPop
	ipPushPop
	ipOther
	ipIgnore // no call begins or ends here, and no eval-loop reference does
)

// classifyIP names the function an IP is in and sorts it.
func classifyIP(name string, frameObjectOwnsCode bool) ipClass {
	fn, _, found := strings.Cut(name, "+")
	if !found || strings.HasPrefix(fn, "/") || strings.HasPrefix(fn, "0x") {
		return ipUnknown
	}
	if fn == "frame_dealloc" && frameObjectOwnsCode {
		return ipIgnore
	}
	for _, p := range framePush {
		if fn == p {
			return ipPush
		}
	}
	for _, p := range framePop {
		if fn == p {
			return ipPop
		}
	}
	for _, p := range framePushPop {
		if fn == p {
			return ipPushPop
		}
	}
	return ipOther
}

// namesPops tells whether n names a function where frames are popped: a
// full symbol table, or Debian trixie's 3.13, which exports
// _PyEval_FrameClearAndPop. Debian's 3.11 names none.
func namesPops(n Namer) bool {
	for _, fn := range framePop {
		if n.Has(fn) {
			return true
		}
	}
	return false
}
