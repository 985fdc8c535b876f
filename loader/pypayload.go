package loader

import (
	"encoding/binary"
	"fmt"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanbuilder"
)

// Decoding what watch_hit read at a Python call's pop (bpf/pyread.h): a
// stream of fields, each a value or a list of values, or the reason it
// could not be read.

// PyObject is a value the reader did not convert: an object of that type.
type PyObject struct{ Type uint64 }

// PyValues is one field of a call's reads. Values holds nil (None), bool,
// int64, string or PyObject; List says the field walked every item (else it
// holds one value).
type PyValues struct {
	Values []any
	List   bool
	Err    *PyReadError
	// Root: read at a push, the argument the values were read from (a
	// temporary: its address is what the pop finds freed); 0 at a pop.
	Root uint64
}

// PyReadError says why a field could not be read at the trap.
type PyReadError struct {
	Code   uint8
	Step   int // the path's step that failed (-1: its start)
	Item   int // the item of a [*] (-1: none)
	Detail uint64
}

// Reasons of bpf/pyread.h's enum py_err, keyed by the generated values
// (TestPyErrText: every reason the C names has its text).
var pyErrText = map[bpf.StagePyErr]string{
	bpf.StagePyErrPY_E_READ:      "unreadable memory",
	bpf.StagePyErrPY_E_FREED:     "the object was freed (a temporary argument?)",
	bpf.StagePyErrPY_E_TYPE:      "not the type the path needs",
	bpf.StagePyErrPY_E_NOATTR:    "no such attribute",
	bpf.StagePyErrPY_E_NOKEY:     "no such key",
	bpf.StagePyErrPY_E_RANGE:     "index out of range",
	bpf.StagePyErrPY_E_BIG:       "too big (items, string or dict probes)",
	bpf.StagePyErrPY_E_COMPUTED:  "a property: computed by Python code, not readable",
	bpf.StagePyErrPY_E_UNSET:     "not set",
	bpf.StagePyErrPY_E_NOFRAME:   "the call's frame was not found",
	bpf.StagePyErrPY_E_NORETURN:  "no return value (it returned a constant or raised)",
	bpf.StagePyErrPY_E_NOTINT:    "an int wider than 64 bits",
	bpf.StagePyErrPY_E_KEYWORD:   "not passed by position, and the call's keyword arguments cannot be found (a bound method kept in a local, or **kwargs not a dict)",
	bpf.StagePyErrPY_E_NODEFAULT: "not passed, and the function has no default for it",
	bpf.StagePyErrPY_E_NOTTEMP:   "not a temporary: read at the return",
}

const (
	pyErrRead     = uint8(bpf.StagePyErrPY_E_READ)
	pyErrFreed    = uint8(bpf.StagePyErrPY_E_FREED)
	pyErrType     = uint8(bpf.StagePyErrPY_E_TYPE)
	pyErrNoFrame  = uint8(bpf.StagePyErrPY_E_NOFRAME)
	pyErrNoReturn = uint8(bpf.StagePyErrPY_E_NORETURN)
)

// FreedObject is the address of the object a read found freed (a
// temporary the pop came too late for), if that is why it failed.
func (e *PyReadError) FreedObject() (uint64, bool) {
	if e == nil || e.Code != pyErrFreed {
		return 0, false
	}
	return e.Detail, true
}

func (e *PyReadError) Error() string {
	msg := fmt.Sprintf("error %d", e.Code)
	if text, ok := pyErrText[bpf.StagePyErr(e.Code)]; ok {
		msg = text
	}
	if e.Item >= 0 {
		msg = fmt.Sprintf("item %d: %s", e.Item, msg)
	}
	switch e.Code {
	case pyErrNoFrame, pyErrNoReturn:
		msg += fmt.Sprintf(" (check %d)", e.Detail)
	case pyErrFreed, pyErrType, pyErrRead:
		msg += fmt.Sprintf(" (at %#x)", e.Detail)
	}
	return msg
}

// Markers and tags of the payload stream.
const (
	pfBegin = uint8(bpf.StagePyMarkPY_F_BEGIN)
	pfEnd   = uint8(bpf.StagePyMarkPY_F_END)
	pfErr   = uint8(bpf.StagePyMarkPY_F_ERR)
	pfList  = uint8(bpf.StagePyMarkPY_F_LIST)
	pfRoot  = uint8(bpf.StagePyMarkPY_F_ROOT)

	ptNone = uint8(bpf.StagePyTagPY_T_NONE)
	ptInt  = uint8(bpf.StagePyTagPY_T_INT)
	ptStr  = uint8(bpf.StagePyTagPY_T_STR)
	ptBool = uint8(bpf.StagePyTagPY_T_BOOL)
	ptObj  = uint8(bpf.StagePyTagPY_T_OBJ)
)

// decodePyPayload splits a call's payload into its fields (n of them).
func decodePyPayload(b []byte, n int) ([]PyValues, error) {
	if n < 0 || n > pyMaxFields {
		return nil, fmt.Errorf("payload: %d fields expected, at most %d can be", n, pyMaxFields)
	}
	out := make([]PyValues, 0, n)
	for len(b) > 0 {
		if len(b) < 2 || b[0] != pfBegin {
			return nil, fmt.Errorf("payload: field %d: bad start %#x", len(out), b[0])
		}
		if int(b[1]) != len(out) {
			return nil, fmt.Errorf("payload: field %d where %d was expected", b[1], len(out))
		}
		b = b[2:]
		var f PyValues
		if len(b) > 0 && b[0] == pfRoot {
			if len(b) < 9 {
				return nil, fmt.Errorf("payload: field %d: truncated root", len(out))
			}
			f.Root = binary.LittleEndian.Uint64(b[1:])
			b = b[9:]
		}
		if len(b) > 0 && b[0] == pfList {
			f.List = true
			b = b[1:]
		}
	values:
		for {
			if len(b) == 0 {
				return nil, fmt.Errorf("payload: field %d: truncated", len(out))
			}
			switch b[0] {
			case pfEnd:
				b = b[1:]
				break values
			case pfErr:
				if len(b) < 13 {
					return nil, fmt.Errorf("payload: field %d: truncated error", len(out))
				}
				e := &PyReadError{Code: b[1], Step: int(int8(b[2])), Item: int(int16(binary.LittleEndian.Uint16(b[3:]))), Detail: binary.LittleEndian.Uint64(b[5:])}
				if b[2] == 0xff {
					e.Step = -1
				}
				f.Err, f.Values = e, nil
				b = b[13:]
				break values
			}
			v, rest, err := decodePyValue(b)
			if err != nil {
				return nil, fmt.Errorf("payload: field %d: %w", len(out), err)
			}
			f.Values = append(f.Values, v)
			b = rest
		}
		out = append(out, f)
	}
	if len(out) != n {
		return nil, fmt.Errorf("payload: %d fields where %d were expected", len(out), n)
	}
	return out, nil
}

func decodePyValue(b []byte) (any, []byte, error) {
	switch b[0] {
	case ptNone:
		return nil, b[1:], nil
	case ptInt:
		if len(b) < 9 {
			return nil, nil, fmt.Errorf("truncated int")
		}
		return int64(binary.LittleEndian.Uint64(b[1:])), b[9:], nil
	case ptBool:
		if len(b) < 2 {
			return nil, nil, fmt.Errorf("truncated bool")
		}
		return b[1] != 0, b[2:], nil
	case ptObj:
		if len(b) < 9 {
			return nil, nil, fmt.Errorf("truncated object")
		}
		return PyObject{Type: binary.LittleEndian.Uint64(b[1:])}, b[9:], nil
	case ptStr:
		if len(b) < 4 {
			return nil, nil, fmt.Errorf("truncated str")
		}
		kind, n := int(b[1]), int(binary.LittleEndian.Uint16(b[2:]))
		if len(b) < 4+n || kind != 1 && kind != 2 && kind != 4 || n%kind != 0 {
			return nil, nil, fmt.Errorf("bad str (kind %d, %d bytes)", kind, n)
		}
		return pyproc.DecodeStr(b[4:4+n], uint32(kind)), b[4+n:], nil
	}
	return nil, nil, fmt.Errorf("unknown tag %#x", b[0])
}

// PyCallRead is what a Python call's exit carries (spanbuilder.Event.Read)
// when its site reads at the trap: every field, or why none could be read.
type PyCallRead struct {
	Fields []PyValues
	Err    error
}

// CallRead makes it a spanbuilder.CallRead.
func (*PyCallRead) CallRead() {}

// pyAssembler joins a trap's payload records (bpf/pyread.h py_flush): the
// first comes with the hit, continuations follow on the same thread.
type pyAssembler struct {
	fields func(site uint32) int // fields read at a site's pops; 0 for none
	held   map[uint32]*heldCall  // by thread
	Lost   uint64                // payloads cut by a lost record
}

type heldCall struct {
	ev   spanbuilder.Event
	data []byte
	next uint16
}

func newPyAssembler(fields func(uint32) int) *pyAssembler {
	return &pyAssembler{fields: fields, held: map[uint32]*heldCall{}}
}

// start takes an exit's hit; true when ev is complete (its Read set, or
// the site reads nothing), false when continuation records are awaited.
func (a *pyAssembler) start(w *bpf.StageWatchEvent, payload []byte, ev *spanbuilder.Event) bool {
	n := a.fields(w.Site)
	switch {
	case n == 0:
		return true
	case w.Flags&wPayload == 0:
		ev.Read = &PyCallRead{Err: &PyReadError{Code: w.Pyerr, Step: -1, Item: -1, Detail: uint64(w.PyerrAt)}}
		return true
	case w.Last != 0:
		ev.Read = a.decode(payload, n)
		return true
	}
	a.held[w.Tid] = &heldCall{ev: *ev, data: append([]byte(nil), payload...), next: 1}
	return false
}

// more takes a continuation record; true when it completed a held call,
// which is then in ev.
func (a *pyAssembler) more(w *bpf.StageWatchEvent, payload []byte, ev *spanbuilder.Event) bool {
	h := a.held[w.Tid]
	if h == nil {
		return false // the start was lost, or given up on
	}
	if w.Seq != h.next {
		delete(a.held, w.Tid)
		a.Lost++
		*ev = h.ev
		ev.Read = &PyCallRead{Err: fmt.Errorf("part of what was read at the trap was lost (the ring buffer was full)")}
		return true
	}
	h.data = append(h.data, payload...)
	h.next++
	if w.Last == 0 {
		return false
	}
	delete(a.held, w.Tid)
	*ev = h.ev
	ev.Read = a.decode(h.data, a.fields(w.Site))
	return true
}

// abandon gives up on a thread's held call: its next hit came first.
func (a *pyAssembler) abandon(tid uint32) (spanbuilder.Event, bool) {
	h := a.held[tid]
	if h == nil {
		return spanbuilder.Event{}, false
	}
	delete(a.held, tid)
	a.Lost++
	h.ev.Read = &PyCallRead{Err: fmt.Errorf("part of what was read at the trap was lost (the ring buffer was full)")}
	return h.ev, true
}

// flush gives up on every held call (the session ends).
func (a *pyAssembler) flush() []spanbuilder.Event {
	var out []spanbuilder.Event
	for tid := range a.held {
		if ev, ok := a.abandon(tid); ok {
			out = append(out, ev)
		}
	}
	return out
}

func (a *pyAssembler) decode(b []byte, n int) *PyCallRead {
	f, err := decodePyPayload(b, n)
	return &PyCallRead{Fields: f, Err: err}
}
