package pyproc

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Version is a CPython version. Micro is -1 when only the file name told us
// (3.10 exports no Py_Version).
type Version struct {
	Major, Minor, Micro int
}

func (v Version) String() string {
	if v.Micro < 0 {
		return fmt.Sprintf("%d.%d", v.Major, v.Minor)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro)
}

func (v Version) atLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// Layout holds the offsets (bytes) pyproc reads by. The thread and frame
// fields are exported for the watchpoint side, which walks frames in BPF.
//
// Where the numbers come from: every offset is offsetof(struct, field) in
// the CPython release's own headers (Include/cpython/*.h and
// Include/internal/pycore_*.h, x86-64, the GIL build), the same for every
// micro release of a minor version. 3.13 and later publish most of them in
// _PyRuntime's _Py_DebugOffsets, read from the target (debugLayout); the
// tables (common, tableLayout) hold the rest. testdata/offsets.c prints
// them from a version's headers, and TestLayoutMatchesHeaders checks the
// tables against it for every interpreter with headers on the machine;
// docs/design.md ("Re-deriving the offsets") says how to add a version.
type Layout struct {
	Version Version

	InterpretersHead  uint64 // _PyRuntime → first interpreter (newest)
	InterpNext        uint64
	InterpModules     uint64 // sys.modules dict
	InterpThreadsHead uint64

	TstateNext     uint64
	TstateThreadID uint64 // pthread_t
	// TstateNativeThreadID is 0 on 3.10, which has no such field: the TID is
	// read from glibc's struct pthread at pthread_t+PthreadTID instead.
	TstateNativeThreadID uint64
	PthreadTID           uint64
	// TstateExc is the exception being raised on the thread (curexc_type
	// before 3.12, current_exception since); 0 where no table says it.
	TstateExc uint64

	// Current frame: tstate+TstateFrame holds a pointer; when CFrameCurrent
	// is >= 0 (3.11, 3.12) that pointer is a _PyCFrame and the frame is at
	// +CFrameCurrent inside it.
	TstateFrame   uint64
	CFrameCurrent int64
	FrameCode     uint64
	FramePrevious uint64
	// FrameCodeTagBits are low bits of the code pointer used as a tag
	// (3.14's _PyStackRef).
	FrameCodeTagBits uint64

	// Dicts. DictKeysLegacy is the 3.10 keys header (dk_size, always 24-byte
	// entries); otherwise dk_log2_size/dk_kind.
	DictUsed, DictVersion, DictKeys, DictValues uint64
	DictKeysLegacy                              bool
	DictValuesArray                             uint64 // values[] inside ma_values (8 on 3.13+)

	UnicodeLength, UnicodeHash, UnicodeState uint64
	ASCIIData, CompactData                   uint64
	UnicodeHasReady                          bool // 3.10, 3.11: state bit 7 is "ready"

	TypeName, TypeFlags, TypeDict, TypeMro uint64
	ModuleDict                             uint64
	FuncName, FuncQualname, FuncCode       uint64
	FuncDict                               uint64
	// __defaults__ (a tuple) and __kwdefaults__ (a dict): on 3.10 the reader
	// at the trap takes an argument a call did not pass from them.
	FuncDefaults, FuncKwDefaults uint64
	WrapperCallable              uint64 // staticmethod, classmethod, property fget, method im_func
	TupleSize, TupleItems        uint64

	CodeFlags, CodeFilename, CodeName, CodeQualname, CodeFirstLine uint64 // CodeQualname 0 on 3.10

	// Frame locals (FindFrame, Local). 3.10: PyFrameObject.f_localsplus
	// indexed by co_varnames, then co_cellvars, co_freevars (CodeNLocals
	// says where cells start); 3.11+: _PyInterpreterFrame.localsplus
	// indexed by co_localsplusnames, co_localspluskinds marking cells.
	FrameLocalsplus uint64
	CodeArgcount    uint64
	// co_kwonlyargcount follows co_argcount and co_posonlyargcount (ints)
	// in every version: CodeArgcount + 8.
	CodeKwOnlyArgcount                      uint64
	CodePosOnlyArgcount                     uint64 // CodeArgcount + 4
	CodeLocalsNames, CodeLocalsKinds        uint64 // kinds 0 on 3.10
	CodeNLocals, CodeCellvars, CodeFreevars uint64 // 3.10 only
	BytesData                               uint64 // ob_sval (co_localspluskinds is a bytes)
	CellRef                                 uint64

	// Values and instance attributes (Eval).
	ListSize, ListItems  uint64
	LongSize, LongDigits uint64 // LongSize is ob_size, or lv_tag when LongTagged (3.12+)
	LongTagged           bool
	FloatValue           uint64
	// tp_basicsize, tp_dictoffset, ht_cached_keys (a heap type's shared keys).
	TypeBasicSize, TypeDictOffset, TypeCachedKeys uint64
	// PyMemberDescrObject.d_member → PyMemberDef type and offset (__slots__).
	MemberDescrDef, MemberDefType, MemberDefOffset uint64

	SipHashRounds int // compression rounds: 2 (siphash24, 3.10) or 1 (siphash13)

	// For reads at a watchpoint trap (BPFLayout). The running thread's state:
	// _PyRuntime+RuntimeTstateCurrent (3.10, 3.11), or the holder of the GIL
	// the interpreter points to at InterpGIL (3.12+, GILHolder in it).
	RuntimeTstateCurrent, InterpGIL, GILHolder uint64
	// The top of the thread's frame stack (3.11+): a returning frame lies
	// just below it.
	TstateDatastackTop uint64
	// The instruction a 3.11+ frame executes (prev_instr, instr_ptr), and
	// its function (f_func, f_funcobj): set before a push takes the code's
	// reference.
	FrameInstr, FrameFuncObj uint64
	// Code sizes: 3.12+ co_framesize (words); 3.11 sums co_nlocalsplus and
	// co_stacksize with the frame's fixed part.
	CodeNLocalsPlus, CodeStacksize, CodeFramesize uint64
	// 3.10's PyFrameObject and PyCodeObject: a returning call's caller keeps
	// the callable and arguments on its value stack.
	FrameValuestack, FrameLasti, CodeCode uint64
	CodeConsts                            uint64 // a CALL_FUNCTION_KW's (3.11, 3.12: KW_NAMES') names are one of co_consts
}

// common fills what is the same from 3.10 to 3.14 (docs/design.md's table).
func common(v Version) Layout {
	return Layout{
		Version:    v,
		TstateNext: 0x8,
		PthreadTID: 0x2d0,
		DictUsed:   0x10, DictVersion: 0x18, DictKeys: 0x20, DictValues: 0x28,
		UnicodeLength: 0x10, UnicodeHash: 0x18, UnicodeState: 0x20,
		TypeName: 0x18, TypeFlags: 0xa8, TypeDict: 0x108, TypeMro: 0x158,
		ModuleDict: 0x10,
		FuncName:   0x20, FuncQualname: 0x28, FuncCode: 0x30, FuncDict: 0x58,
		FuncDefaults: 0x38, FuncKwDefaults: 0x40,
		WrapperCallable: 0x10,
		TupleSize:       0x10, TupleItems: 0x18,
		CodeFilename: 0x70, CodeName: 0x78, CodeQualname: 0x80,
		CodeFlags:     0x30,
		CFrameCurrent: -1,
		SipHashRounds: 1,

		FrameLocalsplus: 0x48, CodeArgcount: 0x34, CodeLocalsNames: 0x60, CodeLocalsKinds: 0x68,
		BytesData: 0x20, CellRef: 0x10,
		ListSize: 0x10, ListItems: 0x18, LongSize: 0x10, LongDigits: 0x18, FloatValue: 0x10,
		TypeBasicSize: 0x20, TypeDictOffset: 0x120, TypeCachedKeys: 0x370,
		MemberDescrDef: 0x28, MemberDefType: 0x8, MemberDefOffset: 0x10,
		LongTagged: v.atLeast(3, 12),
	}
}

// tableLayout covers the versions without _Py_DebugOffsets: offsetof in
// their headers (testdata/offsets.c), except PthreadTID in common (glibc's
// struct pthread, tid at 0x2d0 on x86-64: 3.10 has no native_thread_id).
func tableLayout(v Version) (Layout, error) {
	l := common(v)
	switch v.Minor {
	case 10:
		l.InterpretersHead, l.InterpNext, l.InterpModules, l.InterpThreadsHead = 0x20, 0, 0x358, 0x8
		l.TstateThreadID, l.TstateExc = 0xb0, 0x58
		l.TstateFrame, l.FrameCode, l.FramePrevious = 0x18, 0x20, 0x18
		l.DictKeysLegacy = true
		l.ASCIIData, l.CompactData, l.UnicodeHasReady = 0x30, 0x48, true
		l.CodeFlags, l.CodeFilename, l.CodeName, l.CodeQualname, l.CodeFirstLine = 0x24, 0x68, 0x70, 0, 0x28
		l.SipHashRounds = 2
		// f_localsplus follows f_blockstack[CO_MAXBLOCKS=20] of 12-byte PyTryBlocks.
		l.FrameLocalsplus, l.CodeArgcount, l.CodeLocalsNames, l.CodeLocalsKinds = 0x160, 0x10, 0x48, 0
		l.CodeNLocals, l.CodeCellvars, l.CodeFreevars = 0x1c, 0x58, 0x50
		l.TypeCachedKeys = 0x368
		l.RuntimeTstateCurrent = 0x238
		l.CodeStacksize, l.CodeCode, l.CodeConsts = 0x20, 0x30, 0x38
		l.FrameValuestack, l.FrameLasti = 0x40, 0x60
	case 11:
		l.InterpretersHead, l.InterpNext, l.InterpModules, l.InterpThreadsHead = 0x28, 0, 0x378, 0x10
		l.TstateThreadID, l.TstateNativeThreadID, l.TstateExc = 0x98, 0xa0, 0x60
		l.TstateFrame, l.CFrameCurrent, l.FrameCode, l.FramePrevious = 0x38, 0x8, 0x20, 0x30
		l.ASCIIData, l.CompactData, l.UnicodeHasReady = 0x30, 0x48, true
		l.CodeFirstLine = 0x48
		l.CodeArgcount, l.TypeCachedKeys = 0x38, 0x368
		l.RuntimeTstateCurrent, l.TstateDatastackTop, l.FrameInstr = 0x240, 0x130, 0x38
		l.FrameFuncObj = 0 // f_func
		l.CodeNLocalsPlus, l.CodeStacksize, l.CodeConsts = 0x4c, 0x44, 0x18
	case 12:
		l.InterpretersHead, l.InterpNext, l.InterpModules, l.InterpThreadsHead = 0x28, 0, 0x3b0, 0x48
		l.TstateThreadID, l.TstateNativeThreadID, l.TstateExc = 0x88, 0x90, 0x60
		l.TstateFrame, l.CFrameCurrent, l.FrameCode, l.FramePrevious = 0x38, 0, 0, 0x8
		l.ASCIIData, l.CompactData = 0x28, 0x38
		l.CodeFirstLine = 0x44
		l.InterpGIL, l.GILHolder, l.TstateDatastackTop, l.FrameInstr = 0x180, 0x8, 0xf0, 0x38
		l.FrameFuncObj, l.CodeConsts = 0x10, 0x18
		l.CodeNLocalsPlus, l.CodeStacksize, l.CodeFramesize = 0x48, 0x40, 0x4c
	default:
		return Layout{}, fmt.Errorf("no offset table for CPython %s", v)
	}
	l.CodeKwOnlyArgcount, l.CodePosOnlyArgcount = l.CodeArgcount+8, l.CodeArgcount+4
	return l, nil
}

const debugCookie = "xdebugpy"

// Field names of _Py_DebugOffsets, in struct order (every field a uint64,
// the 8-byte cookie counted as one). The struct grew between 3.13 and 3.14,
// so the position of a field depends on the version that wrote it.
var debugFields313 = []string{
	"cookie", "version", "free_threaded",
	"runtime.size", "runtime.finalizing", "runtime.interpreters_head",
	"interp.size", "interp.id", "interp.next", "interp.threads_head", "interp.gc",
	"interp.imports_modules", "interp.sysdict", "interp.builtins", "interp.ceval_gil",
	"interp.gil", "interp.gil_enabled", "interp.gil_locked", "interp.gil_holder",
	"tstate.size", "tstate.prev", "tstate.next", "tstate.interp", "tstate.current_frame",
	"tstate.thread_id", "tstate.native_thread_id", "tstate.datastack_chunk", "tstate.status",
	"frame.size", "frame.previous", "frame.executable", "frame.instr_ptr", "frame.localsplus", "frame.owner",
	"code.size", "code.filename", "code.name", "code.qualname", "code.linetable", "code.firstlineno",
	"code.argcount", "code.localsplusnames", "code.localspluskinds", "code.co_code_adaptive",
	"object.size", "object.ob_type",
	"type.size", "type.tp_name", "type.tp_repr", "type.tp_flags",
	"tuple.size", "tuple.ob_item", "tuple.ob_size",
	"list.size", "list.ob_item", "list.ob_size",
	"dict.size", "dict.ma_keys", "dict.ma_values",
	"float.size", "float.ob_fval",
	"long.size", "long.lv_tag", "long.ob_digit",
	"bytes.size", "bytes.ob_size", "bytes.ob_sval",
	"unicode.size", "unicode.state", "unicode.length", "unicode.asciiobject_size",
	"gc.size", "gc.collecting",
}

var debugFields314 = []string{
	"cookie", "version", "free_threaded",
	"runtime.size", "runtime.finalizing", "runtime.interpreters_head",
	"interp.size", "interp.id", "interp.next", "interp.threads_head", "interp.threads_main", "interp.gc",
	"interp.imports_modules", "interp.sysdict", "interp.builtins", "interp.ceval_gil",
	"interp.gil", "interp.gil_enabled", "interp.gil_locked", "interp.gil_holder",
	"interp.code_object_generation", "interp.tlbc_generation",
	"tstate.size", "tstate.prev", "tstate.next", "tstate.interp", "tstate.current_frame",
	"tstate.thread_id", "tstate.native_thread_id", "tstate.datastack_chunk", "tstate.status",
	"frame.size", "frame.previous", "frame.executable", "frame.instr_ptr", "frame.localsplus", "frame.owner",
	"frame.stackpointer", "frame.tlbc_index",
	"code.size", "code.filename", "code.name", "code.qualname", "code.linetable", "code.firstlineno",
	"code.argcount", "code.localsplusnames", "code.localspluskinds", "code.co_code_adaptive", "code.co_tlbc",
	"object.size", "object.ob_type",
	"type.size", "type.tp_name", "type.tp_repr", "type.tp_flags",
	"tuple.size", "tuple.ob_item", "tuple.ob_size",
	"list.size", "list.ob_item", "list.ob_size",
	"set.size", "set.used", "set.table", "set.mask",
	"dict.size", "dict.ma_keys", "dict.ma_values",
	"float.size", "float.ob_fval",
	"long.size", "long.lv_tag", "long.ob_digit",
	"bytes.size", "bytes.ob_size", "bytes.ob_sval",
	"unicode.size", "unicode.state", "unicode.length", "unicode.asciiobject_size",
	"gc.size", "gc.collecting",
}

// debugOffsets decodes _Py_DebugOffsets read from the start of _PyRuntime.
func debugOffsets(raw []byte) (map[string]uint64, error) {
	if len(raw) < 24 || !bytes.Equal(raw[:8], []byte(debugCookie)) {
		return nil, fmt.Errorf("_PyRuntime does not start with the %q debug cookie", debugCookie)
	}
	hex := binary.LittleEndian.Uint64(raw[8:])
	names := debugFields314
	if hex>>16 == 0x030d {
		names = debugFields313
	}
	if len(raw) < 8*len(names) {
		return nil, fmt.Errorf("debug offsets truncated")
	}
	d := make(map[string]uint64, len(names))
	for i, n := range names {
		d[n] = binary.LittleEndian.Uint64(raw[8*i:])
	}
	return d, nil
}

// debugLayout builds a Layout from the target's own offsets; the fields the
// debug offsets do not cover are those of 3.13, unchanged in 3.14.
func debugLayout(v Version, d map[string]uint64) (Layout, error) {
	l := common(v)
	l.InterpretersHead = d["runtime.interpreters_head"]
	l.InterpNext = d["interp.next"]
	l.InterpModules = d["interp.imports_modules"]
	l.InterpThreadsHead = d["interp.threads_head"]
	l.TstateNext = d["tstate.next"]
	l.TstateThreadID = d["tstate.thread_id"]
	l.TstateNativeThreadID = d["tstate.native_thread_id"]
	if v.Minor == 13 {
		// Not in 3.13's debug offsets: offsetof(PyThreadState,
		// current_exception) in its headers. Later
		// versions go without exception status until a table says it.
		l.TstateExc = 0x70
	}
	l.TstateFrame = d["tstate.current_frame"]
	l.FrameCode = d["frame.executable"]
	l.FramePrevious = d["frame.previous"]
	if v.atLeast(3, 14) {
		l.FrameCodeTagBits = 0x3 // _PyStackRef tag bits
	}
	l.DictKeys, l.DictValues = d["dict.ma_keys"], d["dict.ma_values"]
	l.DictValuesArray = 8
	l.UnicodeState, l.UnicodeLength = d["unicode.state"], d["unicode.length"]
	l.ASCIIData = d["unicode.asciiobject_size"]
	l.CompactData = l.ASCIIData + 0x10 // utf8_length, utf8
	l.TypeName, l.TypeFlags = d["type.tp_name"], d["type.tp_flags"]
	l.TupleSize, l.TupleItems = d["tuple.ob_size"], d["tuple.ob_item"]
	l.CodeFilename, l.CodeName, l.CodeQualname = d["code.filename"], d["code.name"], d["code.qualname"]
	l.CodeFirstLine = d["code.firstlineno"]
	l.FrameLocalsplus, l.CodeArgcount = d["frame.localsplus"], d["code.argcount"]
	l.CodeKwOnlyArgcount, l.CodePosOnlyArgcount = l.CodeArgcount+8, l.CodeArgcount+4
	l.FrameInstr = d["frame.instr_ptr"]
	// The GIL the interpreter uses and its holder; the data-stack top follows
	// the chunk pointer. Not in the debug offsets: co_nlocalsplus,
	// co_stacksize and co_framesize, unchanged since 3.12.
	// (interp.gil_holder is the holder's offset in the interpreter's own GIL.)
	l.InterpGIL, l.GILHolder = d["interp.ceval_gil"], d["interp.gil_holder"]-d["interp.gil"]
	l.TstateDatastackTop = d["tstate.datastack_chunk"] + 8
	l.CodeNLocalsPlus, l.CodeStacksize, l.CodeFramesize = 0x48, 0x40, 0x4c
	l.FrameFuncObj = d["frame.previous"] + 8 // f_funcobj follows previous (3.13, 3.14)
	l.CodeConsts = 0x18                      // after the object's variable-size header
	l.CodeLocalsNames, l.CodeLocalsKinds = d["code.localsplusnames"], d["code.localspluskinds"]
	l.BytesData = d["bytes.ob_sval"]
	l.ListSize, l.ListItems = d["list.ob_size"], d["list.ob_item"]
	l.LongSize, l.LongDigits = d["long.lv_tag"], d["long.ob_digit"]
	l.FloatValue = d["float.ob_fval"]

	// A layout we guessed wrong (a future version that reordered the
	// struct) shows up as offsets no CPython has had; better to refuse than
	// to read garbage.
	sane := d["object.ob_type"] == 8 && l.TstateNext != 0 && l.TstateNext < d["tstate.size"] &&
		l.InterpModules < d["interp.size"] && l.InterpThreadsHead < d["interp.size"] &&
		l.TstateNativeThreadID < d["tstate.size"] && l.FramePrevious < d["frame.size"] &&
		l.CodeName < d["code.size"] && l.CodeFirstLine < d["code.size"] &&
		l.ASCIIData >= 0x20 && l.ASCIIData <= 0x40 && l.TupleItems < 0x40 &&
		l.InterpretersHead < d["runtime.size"] &&
		l.FrameLocalsplus < d["frame.size"] && l.CodeLocalsNames < d["code.size"] &&
		l.CodeLocalsKinds < d["code.size"] && l.ListItems < 0x40 && l.LongDigits < 0x40 &&
		l.FloatValue < 0x40 && l.BytesData < 0x40
	if !sane {
		return Layout{}, fmt.Errorf("CPython %s: _Py_DebugOffsets have a layout pyproc does not know (offsets out of range)", v)
	}
	return l, nil
}
