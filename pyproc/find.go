package pyproc

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Code flags a caller checks before arming: a generator's or coroutine's
// code object sees creation and destruction, not each resume.
const (
	CoGenerator         = 0x20
	CoCoroutine         = 0x80
	CoIterableCoroutine = 0x100
	CoAsyncGenerator    = 0x200
)

// Code is a function's code object in the target. The watchpoint goes on
// its ob_refcnt, at Addr+0.
type Code struct {
	Addr      uint64
	Func      uint64 // the function object it was reached through (after unwrapping)
	Owner     uint64 // the class whose attribute it is (0: a module's function)
	Name      string
	Qualname  string // co_qualname; func_qualname on 3.10
	Filename  string
	FirstLine int
	Flags     uint32
	Refcnt    uint64 // ob_refcnt when read
	// Immortal (3.12+) code objects, those of deep-frozen stdlib modules, are
	// never increfed: a watchpoint on them sees no calls.
	Immortal bool
}

// Suspends says whether calls to it suspend and resume (generators, coroutines).
func (c *Code) Suspends() bool {
	return c.Flags&(CoGenerator|CoCoroutine|CoIterableCoroutine|CoAsyncGenerator) != 0
}

// ModuleNotFoundError: the module is not in sys.modules, usually because the
// target has not imported it yet.
type ModuleNotFoundError struct {
	Module string
	Near   []string
	Loaded int
}

func (e *ModuleNotFoundError) Error() string {
	s := fmt.Sprintf("module %q is not in sys.modules (not imported yet? %d modules loaded)", e.Module, e.Loaded)
	if len(e.Near) > 0 {
		s += "; near: " + strings.Join(e.Near, ", ")
	}
	return s
}

// ErrFinalizing: the interpreter has dropped sys.modules, which it does
// only while it shuts down (the target is exiting).
var ErrFinalizing = errors.New("the interpreter is shutting down (sys.modules is gone)")

// ErrNoInterpreter: the runtime lists no interpreter, before it is
// initialised or once it has finalised.
var ErrNoInterpreter = errors.New("no interpreter")

// Exiting tells whether err comes of the target's exit: its interpreter
// shutting down, or the process gone by the time of the read.
func Exiting(err error) bool {
	return errors.Is(err, ErrFinalizing) || errors.Is(err, unix.ESRCH)
}

// AttributeError: a qualname component is not in its module's or class's dict.
type AttributeError struct {
	Owner, Name string
	Near        []string
}

func (e *AttributeError) Error() string {
	s := fmt.Sprintf("%s has no attribute %q", e.Owner, e.Name)
	if len(e.Near) > 0 {
		s += "; near: " + strings.Join(e.Near, ", ")
	}
	return s
}

// NotFunctionError: the name resolves, but not to something with a code object.
type NotFunctionError struct {
	Path, Type string
}

func (e *NotFunctionError) Error() string {
	return fmt.Sprintf("%s is of type %s, not a function", e.Path, e.Type)
}

const (
	maxNearKeys = 1 << 17 // keys listed for a "near" suggestion
	maxUnwrap   = 16      // decorator layers followed
)

// FindCode walks sys.modules[module] → qualname to a function and returns
// its code object. Classes are searched along their MRO, as getattr does;
// staticmethod, classmethod, property (its getter), bound methods and
// functools.wraps-style wrappers (__wrapped__) are unwrapped, because a
// wrapper's code object is shared by everything it wraps.
//
// A module enters sys.modules before its body has run, so an AttributeError
// shortly after an import can go away on retry.
func (p *Process) FindCode(module, qualname string) (*Code, error) {
	if module == "" || qualname == "" {
		return nil, fmt.Errorf("FindCode: empty module or qualname")
	}
	interp, err := p.mainInterp()
	if err != nil {
		return nil, err
	}
	modules, err := p.m.optPtr(interp + p.layout.InterpModules)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading sys.modules: %w", err)
	case modules == 0:
		return nil, ErrFinalizing
	}
	mod, ok, err := p.dictGet(modules, module)
	if err != nil {
		return nil, fmt.Errorf("reading sys.modules: %w", err)
	}
	if !ok {
		keys, _ := p.dictKeys(modules, maxNearKeys)
		return nil, &ModuleNotFoundError{Module: module, Near: nearNames(module, keys, 8), Loaded: len(keys)}
	}
	obj, path := mod, module
	var owner uint64
	for _, name := range strings.Split(qualname, ".") {
		if name == "<locals>" {
			return nil, fmt.Errorf("%s.%s: a function local to another function is created per call and cannot be reached from its module", module, qualname)
		}
		owner = 0
		if p.isClass(obj) {
			owner = obj
		}
		if obj, err = p.getattr(obj, name, path); err != nil {
			return nil, err
		}
		path += "." + name
	}
	fn, err := p.unwrap(obj, path)
	if err != nil {
		return nil, err
	}
	c, err := p.readCode(fn, path)
	if err != nil {
		return nil, err
	}
	c.Owner = owner
	return c, nil
}

// getattr looks name up in a module's dict or along a class's MRO.
func (p *Process) getattr(obj uint64, name, path string) (uint64, error) {
	var dicts []uint64
	switch {
	case p.isModule(obj):
		d, err := p.m.ptr(obj + p.layout.ModuleDict)
		if err != nil {
			return 0, fmt.Errorf("%s: module dict: %w", path, err)
		}
		dicts = []uint64{d}
	case p.isClass(obj):
		mro, err := p.mro(obj)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		for _, c := range mro {
			// Built-in static types (object) keep no tp_dict from 3.12 on,
			// and their attributes are never what we look for.
			if f, err := p.typeFlags(c); err != nil || f&flagHeapType == 0 {
				continue
			}
			if d, err := p.m.optPtr(c + p.layout.TypeDict); err == nil && d != 0 {
				dicts = append(dicts, d)
			}
		}
	default:
		t, _ := p.typeOf(obj)
		return 0, &NotFunctionError{Path: path, Type: p.typeName(t) + " (neither a module nor a class)"}
	}
	for _, d := range dicts {
		v, ok, err := p.dictGet(d, name)
		if err != nil {
			return 0, fmt.Errorf("%s: reading dict: %w", path, err)
		}
		if ok {
			return v, nil
		}
	}
	var keys []string
	for _, d := range dicts {
		k, _ := p.dictKeys(d, maxNearKeys)
		keys = append(keys, k...)
	}
	return 0, &AttributeError{Owner: path, Name: name, Near: nearNames(name, keys, 8)}
}

// unwrap follows wrappers down to a plain function.
func (p *Process) unwrap(obj uint64, path string) (uint64, error) {
	for depth := 0; depth < maxUnwrap; depth++ {
		t, err := p.typeOf(obj)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		switch t {
		case p.types.function:
			if d, err := p.m.optPtr(obj + p.layout.FuncDict); err == nil && d != 0 {
				if w, ok, err := p.dictGet(d, "__wrapped__"); err == nil && ok {
					obj = w
					continue
				}
			}
			return obj, nil
		case p.types.static, p.types.class, p.types.method, p.types.property:
			// sm_callable, cm_callable, im_func and fget all sit at +0x10.
			inner, err := p.m.optPtr(obj + p.layout.WrapperCallable)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", path, err)
			}
			if inner == 0 {
				return 0, &NotFunctionError{Path: path, Type: p.typeName(t) + " without a function (no getter?)"}
			}
			obj = inner
			continue
		}
		if d := p.instanceDict(obj, t); d != 0 {
			if w, ok, err := p.dictGet(d, "__wrapped__"); err == nil && ok {
				obj = w
				continue
			}
		}
		return 0, &NotFunctionError{Path: path, Type: p.typeName(t)}
	}
	return 0, fmt.Errorf("%s: more than %d layers of wrappers", path, maxUnwrap)
}

func (p *Process) readCode(fn uint64, path string) (*Code, error) {
	l := &p.layout
	addr, err := p.m.ptr(fn + l.FuncCode)
	if err != nil {
		return nil, fmt.Errorf("%s: __code__: %w", path, err)
	}
	if t, err := p.typeOf(addr); err != nil || t != p.types.code {
		return nil, fmt.Errorf("%s: __code__ at %#x is not a code object", path, addr)
	}
	hdr, err := p.m.block(addr, 0x90)
	if err != nil {
		return nil, err
	}
	c := &Code{
		Addr: addr, Func: fn, Refcnt: hdr.u64(0),
		Flags:     hdr.u32(l.CodeFlags),
		FirstLine: int(int32(hdr.u32(l.CodeFirstLine))),
	}
	// _Py_IsImmortal: the low 32 bits of ob_refcnt, read as signed, are negative.
	c.Immortal = l.Version.Traits().Immortal && int32(uint32(c.Refcnt)) < 0
	if c.Name, err = p.readStr(hdr.u64(l.CodeName)); err != nil {
		return nil, fmt.Errorf("%s: co_name: %w", path, err)
	}
	if c.Filename, err = p.readStr(hdr.u64(l.CodeFilename)); err != nil {
		return nil, fmt.Errorf("%s: co_filename: %w", path, err)
	}
	qn := hdr.u64(l.CodeQualname)
	if l.CodeQualname == 0 {
		if qn, err = p.m.ptr(fn + l.FuncQualname); err != nil {
			return nil, fmt.Errorf("%s: __qualname__: %w", path, err)
		}
	}
	if c.Qualname, err = p.readStr(qn); err != nil {
		return nil, fmt.Errorf("%s: qualname: %w", path, err)
	}
	return c, nil
}
