package pyproc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Process is an attached CPython process. It holds no lock on the target:
// every call reads fresh memory. Not safe for concurrent use.
type Process struct {
	Pid    int
	Path   string // file holding the interpreter, as mapped by the target
	layout Layout
	m      mem
	closer interface{ Close() error }
	types  typeAddrs
	// runtime is the address of _PyRuntime; hashKey is _Py_HashSecret's
	// SipHash key, random per process.
	runtime    uint64
	hashKey    [2]uint64
	hashSecret uint64
	// nsTIDs maps the target's thread ids to ours when it runs in a PID
	// namespace of its own; empty (not nil) when it shares ours.
	nsTIDs map[int]int
	// hashOK: 0 not yet checked, 1 our str hash matches the target's, -1 it
	// does not (every lookup scans).
	hashOK int8
	// tstates remembers which PyThreadState belongs to a TID (FindFrame),
	// re-checked on every use.
	tstates map[int]Thread
	// cache keeps what Eval learned of types across calls (typecache.go);
	// arena holds the buffers of an Eval's vectored reads (segs.go).
	cache *typeCache
	arena arena
	Stats Stats
}

// Stats counts how lookups went, to spot a hash path that stopped working.
type Stats struct {
	Fallbacks int // hashed probes that failed and fell back to a scan
	// Hash secrets read again: attached before the interpreter set it.
	HashRereads int
	// Reads counts the system calls that copied the target's memory; a
	// vectored read of many segments is one (more past 1,024 segments).
	Reads int
}

// typeAddrs are the built-in type objects we compare ob_type with.
type typeAddrs struct {
	str, dict, module, function, typ, static, class, property, method, code, tuple uint64
	// For Eval and Local; 0 when the binary does not export one (then
	// tp_flags subclass bits or tp_name stand in).
	list, long, boolean, float, none, member, getset, cell, bytes, object uint64
}

// ErrCorrupt marks interpreter state no CPython makes: a list that loops.
// A process can write its own memory so; reading it again will not help.
var ErrCorrupt = errors.New("corrupt interpreter state")

// ErrUnsupported marks an interpreter pyproc will never read (too old,
// free-threaded, unknown version): retrying cannot help.
var ErrUnsupported = errors.New("unsupported interpreter")

// Attach finds the interpreter inside process pid and works out its version
// and layout. It refuses versions before 3.10 and free-threaded builds.
func Attach(pid int) (*Process, error) { return attachPID(pid, nil) }

func attachPID(pid int, wrap func(Memory) Memory) (*Process, error) {
	b, err := findInterpreter(pid)
	if err != nil {
		return nil, err
	}
	pm := newProcMemory(pid)
	var r Memory = pm
	if wrap != nil {
		r = wrap(pm)
	}
	p, err := attach(r, b)
	if err != nil {
		pm.Close()
		return nil, fmt.Errorf("pid %d (%s): %w", pid, b.path, err)
	}
	p.Pid, p.closer = pid, pm
	pm.reads = &p.Stats.Reads
	return p, nil
}

func attach(r Memory, b *interpBinary) (*Process, error) {
	p := &Process{Path: b.path, m: mem{r}, runtime: b.syms["_PyRuntime"]}
	v, flags, named := nameVersion(b.path)
	if addr, ok := b.syms["Py_Version"]; ok {
		hex, err := p.m.u32(addr)
		if err != nil {
			return nil, fmt.Errorf("reading Py_Version: %w", err)
		}
		v = Version{int(hex >> 24), int(hex >> 16 & 0xff), int(hex >> 8 & 0xff)}
	} else if !named {
		return nil, fmt.Errorf("%w: cannot tell the CPython version: no Py_Version symbol and no version in the file name", ErrUnsupported)
	}
	if err := v.unsupported(); err != nil {
		return nil, err
	}
	if containsRune(flags, 't') {
		return nil, freeThreaded(v)
	}
	var l Layout
	if v.Traits().DebugOffsets {
		// Read enough for the longest known struct; the prefix tells which it is.
		raw, err := p.m.bytes(p.runtime, 8*len(debugFields314))
		if err != nil {
			return nil, fmt.Errorf("reading _Py_DebugOffsets: %w", err)
		}
		d, err := debugOffsets(raw)
		if err != nil {
			return nil, fmt.Errorf("CPython %s: %w", v, err)
		}
		if d["free_threaded"] != 0 {
			return nil, freeThreaded(v)
		}
		if hex := d["version"]; !v.sameVersion(hex) {
			return nil, fmt.Errorf("Py_Version says %s but _Py_DebugOffsets says %#x", v, hex)
		}
		if l, err = debugLayout(v, d); err != nil {
			return nil, err
		}
	} else {
		var err error
		if l, err = tableLayout(v); err != nil {
			return nil, err
		}
	}
	p.layout = l
	for _, name := range []string{"_Py_HashSecret", "PyUnicode_Type", "PyDict_Type", "PyModule_Type", "PyFunction_Type", "PyType_Type", "PyCode_Type", "PyTuple_Type"} {
		if b.syms[name] == 0 {
			return nil, fmt.Errorf("CPython %s: symbol %s not found in %s", v, name, b.path)
		}
	}
	p.hashSecret = b.syms["_Py_HashSecret"]
	if err := p.readHashKey(); err != nil {
		return nil, err
	}
	p.types = typeAddrs{
		str: b.syms["PyUnicode_Type"], dict: b.syms["PyDict_Type"], module: b.syms["PyModule_Type"],
		function: b.syms["PyFunction_Type"], typ: b.syms["PyType_Type"],
		static: b.syms["PyStaticMethod_Type"], class: b.syms["PyClassMethod_Type"],
		property: b.syms["PyProperty_Type"], method: b.syms["PyMethod_Type"],
		code: b.syms["PyCode_Type"], tuple: b.syms["PyTuple_Type"],
		list: b.syms["PyList_Type"], long: b.syms["PyLong_Type"], boolean: b.syms["PyBool_Type"],
		float: b.syms["PyFloat_Type"], none: b.syms["_Py_NoneStruct"], member: b.syms["PyMemberDescr_Type"],
		getset: b.syms["PyGetSetDescr_Type"], cell: b.syms["PyCell_Type"], bytes: b.syms["PyBytes_Type"],
		object: b.syms["PyBaseObject_Type"],
	}
	return p, nil
}

func containsRune(s string, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}

// Version is the target's CPython version.
func (p *Process) Version() Version { return p.layout.Version }

// Layout returns the offsets in use, for code that reads the same structures
// elsewhere (BPF frame walks).
func (p *Process) Layout() Layout { return p.layout }

// Close releases the /proc/PID/mem descriptor, if one was opened.
func (p *Process) Close() error {
	if p.closer != nil {
		return p.closer.Close()
	}
	return nil
}

// mainInterp is the oldest interpreter: the list is pushed at the head, so
// the main one is last. Subinterpreters (rare) are not walked.
func (p *Process) mainInterp() (uint64, error) {
	in, err := p.m.ptr(p.runtime + p.layout.InterpretersHead)
	if err != nil {
		return 0, fmt.Errorf("%w (is the runtime initialised?): %w", ErrNoInterpreter, err)
	}
	for i := 0; i < 1024; i++ {
		next, err := p.m.optPtr(in + p.layout.InterpNext)
		if err != nil {
			return 0, err
		}
		if next == 0 {
			return in, nil
		}
		in = next
	}
	return 0, fmt.Errorf("interpreter list does not end after 1024: %w", ErrCorrupt)
}

func freeThreaded(v Version) error {
	return fmt.Errorf("%w: CPython %s is a free-threaded build (Py_GIL_DISABLED): it defers reference counts, so a watchpoint on a code object's ob_refcnt would not see calls", ErrUnsupported, v)
}

// readHashKey reads _Py_HashSecret, which the interpreter sets while it
// starts: read too early, it is zero.
func (p *Process) readHashKey() error {
	key, err := p.m.bytes(p.hashSecret, 16)
	if err != nil {
		return fmt.Errorf("reading _Py_HashSecret: %w", err)
	}
	p.hashKey = [2]uint64{binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[8:])}
	return nil
}
