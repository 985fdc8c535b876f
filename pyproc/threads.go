package pyproc

import (
	"fmt"

	"github.com/specprobe/specprobe/internal/procfs"
)

// maxThreads bounds the thread-state list walk.
const maxThreads = 1 << 14

// Thread is one PyThreadState of the main interpreter.
type Thread struct {
	Addr     uint64 // the PyThreadState
	PthreadT uint64 // thread_id (pthread_self())
	TID      int    // native (kernel) thread id; 0 if it could not be read
}

// Threads lists the main interpreter's thread states with their kernel TIDs,
// newest first (CPython pushes new thread states at the head).
func (p *Process) Threads() ([]Thread, error) {
	l := &p.layout
	interp, err := p.mainInterp()
	if err != nil {
		return nil, err
	}
	ts, err := p.m.optPtr(interp + l.InterpThreadsHead)
	if err != nil {
		return nil, fmt.Errorf("thread list: %w", err)
	}
	var out []Thread
	seen := map[uint64]bool{}
	for ts != 0 {
		if seen[ts] || len(out) >= maxThreads {
			return out, fmt.Errorf("thread list does not end (at %#x): %w", ts, ErrCorrupt)
		}
		seen[ts] = true
		t := Thread{Addr: ts}
		if t.PthreadT, err = p.m.u64(ts + l.TstateThreadID); err != nil {
			return out, err
		}
		t.TID = p.nativeTID(ts, t.PthreadT)
		out = append(out, t)
		if ts, err = p.m.optPtr(ts + l.TstateNext); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (p *Process) nativeTID(ts, pthread uint64) int {
	l := &p.layout
	if l.TstateNativeThreadID != 0 {
		v, err := p.m.u64(ts + l.TstateNativeThreadID)
		if err != nil {
			return 0
		}
		return p.hostTID(int(int32(v)))
	}
	// 3.10 keeps only pthread_t, which on glibc points at struct pthread
	// whose tid field sits at PthreadTID. Check the result names a thread
	// of the target: musl or another libc would put something else there.
	if !validAddr(pthread) {
		return 0
	}
	v, err := p.m.u32(pthread + l.PthreadTID)
	if err != nil || v == 0 {
		return 0
	}
	tid := p.hostTID(int(v))
	if p.Pid != 0 && !procfs.TaskAlive(p.Pid, tid) {
		return 0
	}
	return tid
}

// hostTID turns a thread id as the target numbers it (in its own PID
// namespace, in a container) into the one our /proc and the kernel's
// events use; 0 when the thread is not found.
func (p *Process) hostTID(inner int) int {
	if p.Pid == 0 || inner == 0 {
		return inner
	}
	if p.nsTIDs == nil {
		p.nsTIDs = nsThreadIDs(p.Pid)
	}
	if len(p.nsTIDs) == 0 {
		return inner // same namespace as ours
	}
	host, ok := p.nsTIDs[inner]
	if !ok { // a thread started since: read again
		p.nsTIDs = nsThreadIDs(p.Pid)
		host = p.nsTIDs[inner]
	}
	return host
}

// nsThreadIDs maps each thread's id in the target's PID namespace to ours
// (NSpid in /proc/PID/task/TID/status); empty when the target is in ours.
func nsThreadIDs(pid int) map[int]int {
	out := map[int]int{}
	tids, _ := procfs.Tasks(pid)
	for _, tid := range tids {
		st, err := procfs.ReadTaskStatus(pid, tid)
		if err != nil {
			continue
		}
		if len(st.NSpid) < 2 {
			return map[int]int{}
		}
		out[st.NSpid[len(st.NSpid)-1]] = st.NSpid[0]
	}
	return out
}

// maxFrames bounds a stack walk.
const maxFrames = 4096

// Stack returns the code objects on a thread's Python stack, innermost
// first, following the same offsets a BPF frame walk would use.
func (p *Process) Stack(t Thread) ([]*Code, error) {
	l := &p.layout
	f, err := p.currentFrame(t.Addr)
	if err != nil {
		return nil, err
	}
	var out []*Code
	for n := 0; f != 0 && n < maxFrames; n++ {
		raw, err := p.m.u64(f + l.FrameCode)
		if err != nil {
			return out, err
		}
		code := raw &^ l.FrameCodeTagBits
		if t, err := p.typeOf(code); err == nil && t == p.types.code {
			c := &Code{Addr: code}
			hdr, err := p.m.block(code, 0x90)
			if err != nil {
				return out, err
			}
			c.Name, _ = p.readStr(hdr.u64(l.CodeName))
			c.Filename, _ = p.readStr(hdr.u64(l.CodeFilename))
			c.FirstLine = int(int32(hdr.u32(l.CodeFirstLine)))
			c.Flags = hdr.u32(l.CodeFlags)
			if l.CodeQualname != 0 {
				c.Qualname, _ = p.readStr(hdr.u64(l.CodeQualname))
			}
			// 3.12+ push a shim frame where C calls into the eval loop.
			if c.Name != "<interpreter trampoline>" {
				out = append(out, c)
			}
		}
		if f, err = p.m.optPtr(f + l.FramePrevious); err != nil {
			return out, err
		}
	}
	return out, nil
}

// ExceptionSlot is the address of the exception being raised on thread t
// (non-NULL while one propagates), or 0 where the layout does not say.
func (p *Process) ExceptionSlot(t Thread) uint64 {
	if p.layout.TstateExc == 0 || t.Addr == 0 {
		return 0
	}
	return t.Addr + p.layout.TstateExc
}

// TypeName is the name of the type object at t ("?" when unreadable): the
// exception type watch_hit read for a call that raised.
func (p *Process) TypeName(t uint64) string { return p.typeName(t) }
