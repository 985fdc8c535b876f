package pyproc

import (
	"fmt"
	"strings"
)

// maxLocals bounds co_localsplusnames / co_varnames: CPython has no hard
// limit, but no real function has more; a larger count is a misread.
const maxLocals = 1 << 14

// Frame is one Python call in progress: a _PyInterpreterFrame (3.11+, in
// the thread's data stack) or a PyFrameObject (3.10). Its memory is reused
// as soon as the call returns, so every read through it re-checks that it
// still runs Code.
type Frame struct {
	Addr   uint64 // the frame
	Code   uint64 // its code object
	Thread Thread
	Depth  int // 0: the thread's current (innermost) frame
}

// FrameNotFoundError: the code object is not on the thread's stack (the call
// already returned, or runs on another thread).
type FrameNotFoundError struct {
	TID    int
	Code   uint64
	Frames int      // frames walked
	Stack  []string // innermost first, for the message; may be partial
}

func (e *FrameNotFoundError) Error() string {
	msg := fmt.Sprintf("code object %#x is not on thread %d's stack", e.Code, e.TID)
	switch {
	case e.Frames == 0:
		return msg + ": the thread runs no Python code now"
	case len(e.Stack) == 0:
		return fmt.Sprintf("%s (%d frames, their names unreadable)", msg, e.Frames)
	}
	return fmt.Sprintf("%s; the thread runs %s", msg, strings.Join(e.Stack, " <- "))
}

// currentFrame is the thread's innermost frame; 0 when it runs no Python.
// 3.11 and 3.12 reach it through the _PyCFrame the thread state points at.
func (p *Process) currentFrame(ts uint64) (uint64, error) {
	l := &p.layout
	f, err := p.m.optPtr(ts + l.TstateFrame)
	if err != nil || f == 0 || l.CFrameCurrent < 0 {
		return f, err
	}
	return p.m.optPtr(f + uint64(l.CFrameCurrent))
}

// threadByTID finds the thread state of a kernel TID and returns it with
// its first bytes (ids and current-frame pointer: one read). The answer is
// cached: a watchpoint hit asks for the same thread each time, and walking
// every thread state costs a few reads per thread. The cached entry is used
// only while the thread state still carries that thread's ids.
func (p *Process) threadByTID(tid int, fresh bool) (Thread, block, error) {
	l := &p.layout
	n := int(max(l.TstateThreadID, l.TstateNativeThreadID, l.TstateFrame) + 8)
	if th, ok := p.tstates[tid]; ok && !fresh {
		b, err := p.m.block(th.Addr, n)
		if err == nil && b.u64(l.TstateThreadID) == th.PthreadT {
			native := int(int32(b.u64(l.TstateNativeThreadID)))
			if l.TstateNativeThreadID == 0 {
				native = p.nativeTID(th.Addr, th.PthreadT)
			}
			if native == tid {
				return th, b, nil
			}
		}
		delete(p.tstates, tid)
	}
	threads, err := p.Threads()
	if err != nil {
		return Thread{}, block{}, err
	}
	var tids []string
	for _, th := range threads {
		if th.TID == tid {
			b, err := p.m.block(th.Addr, n)
			if err != nil {
				return Thread{}, block{}, err
			}
			if p.tstates == nil {
				p.tstates = map[int]Thread{}
			}
			p.tstates[tid] = th
			return th, b, nil
		}
		tids = append(tids, fmt.Sprint(th.TID))
	}
	return Thread{}, block{}, fmt.Errorf("no Python thread with TID %d (threads: %s)", tid, strings.Join(tids, ", "))
}

// FindFrame walks thread tid's frames from the current one outwards and
// returns the innermost frame running code (a recursive call finds its
// deepest activation). Meant for a watched call that is still running: the
// thread keeps executing while we read, so the caller confirms afterwards
// that the call was still in progress (the code object's refcount).
func (p *Process) FindFrame(tid int, code uint64) (*Frame, error) {
	if !validObj(code) {
		return nil, fmt.Errorf("FindFrame: bad code object address %#x", code)
	}
	f, err := p.findFrame(tid, code, false)
	if _, miss := err.(*FrameNotFoundError); miss && p.tstates != nil {
		// The cached thread state may belong to a thread that exited.
		f, err = p.findFrame(tid, code, true)
	}
	return f, err
}

func (p *Process) findFrame(tid int, code uint64, fresh bool) (*Frame, error) {
	l := &p.layout
	th, ts, err := p.threadByTID(tid, fresh)
	if err != nil {
		return nil, err
	}
	// currentFrame, from the thread state bytes already read.
	f := ts.u64(l.TstateFrame)
	if f != 0 && !validObj(f) {
		return nil, fmt.Errorf("thread %d: bad frame pointer %#x", tid, f)
	}
	if f != 0 && l.CFrameCurrent >= 0 {
		if f, err = p.m.optPtr(f + uint64(l.CFrameCurrent)); err != nil {
			return nil, fmt.Errorf("thread %d: current frame: %w", tid, err)
		}
	}
	// The code and previous pointers are 0x20 bytes apart at most: one read per frame.
	span := int(max(l.FrameCode, l.FramePrevious) + 8)
	depth := 0
	for ; f != 0 && depth < maxFrames; depth++ {
		b, err := p.m.block(f, span)
		if err != nil {
			return nil, fmt.Errorf("thread %d: frame %d at %#x: %w", tid, depth, f, err)
		}
		if b.u64(l.FrameCode)&^l.FrameCodeTagBits == code {
			return &Frame{Addr: f, Code: code, Thread: th, Depth: depth}, nil
		}
		f = b.u64(l.FramePrevious)
		if f != 0 && !validObj(f) {
			return nil, fmt.Errorf("thread %d: frame %d: bad previous pointer %#x", tid, depth, f)
		}
	}
	if f != 0 {
		return nil, fmt.Errorf("thread %d: more than %d frames", tid, maxFrames)
	}
	e := &FrameNotFoundError{TID: tid, Code: code, Frames: depth}
	stack, _ := p.Stack(th)
	for i, c := range stack {
		if i == 8 {
			e.Stack = append(e.Stack, "…")
			break
		}
		e.Stack = append(e.Stack, c.Name)
	}
	return nil, e
}

// localSlot says where a local lives: localsplus index, and whether that
// slot holds a cell whose content is the value.
type localSlot struct {
	index int
	cell  bool
}

// LocalNames lists a frame's local variable names in slot order: the
// arguments first (self, batch, …), then other locals, cells, free vars.
func (p *Process) LocalNames(f *Frame) ([]string, error) {
	names, err := p.localNameTuples(f.Code)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		s, err := p.readStr(n)
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Local returns the object (PyObject*) a frame's local variable name holds:
// an argument, a local, or a cell's content. It fails when the frame no
// longer runs f.Code (the call returned) or the variable is unbound.
func (p *Process) Local(f *Frame, name string) (uint64, error) {
	l := &p.layout
	if f == nil || !validObj(f.Addr) {
		return 0, fmt.Errorf("Local: no frame")
	}
	slot, err := p.findLocal(f.Code, name)
	if err != nil {
		return 0, err
	}
	// One read from the frame's start to the slot: the code pointer (to see
	// the frame still runs this call) and the slot come together.
	end := l.FrameLocalsplus + 8*uint64(slot.index+1)
	b, err := p.m.block(f.Addr, int(end))
	if err != nil {
		return 0, fmt.Errorf("local %q: %w", name, err)
	}
	if b.u64(l.FrameCode)&^l.FrameCodeTagBits != f.Code {
		return 0, fmt.Errorf("local %q: frame %#x no longer runs code %#x (the call returned)", name, f.Addr, f.Code)
	}
	// 3.10 keeps f_valuestack just past the locals and cells: a slot beyond
	// it means the code and frame disagree.
	if l.CodeNLocals != 0 && b.u64(0x40) < f.Addr+end {
		return 0, fmt.Errorf("local %q: slot %d is past the frame's locals", name, slot.index)
	}
	// 3.14's _PyStackRef tags the same low bits as the code pointer.
	obj := b.u64(end-8) &^ l.FrameCodeTagBits
	if obj == 0 {
		return 0, fmt.Errorf("local %q is unbound (not assigned yet, or deleted)", name)
	}
	if !validObj(obj) {
		return 0, fmt.Errorf("local %q: bad object pointer %#x", name, obj)
	}
	if t, err := p.typeOf(obj); err != nil {
		return 0, fmt.Errorf("local %q: %w", name, err)
	} else if t == p.types.cell && p.types.cell != 0 && (slot.cell || p.isCellSlot(f.Code, slot.index)) {
		// A variable captured by an inner function lives in a cell.
		v, err := p.m.optPtr(obj + l.CellRef)
		if err != nil {
			return 0, fmt.Errorf("local %q: cell: %w", name, err)
		}
		if v == 0 {
			return 0, fmt.Errorf("local %q is unbound (empty cell)", name)
		}
		return v, nil
	}
	return obj, nil
}
