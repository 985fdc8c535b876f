package tracer

import (
	"slices"

	"github.com/specprobe/specprobe/loader"
)

// pushedReads keeps, per site and thread, what each open call's entry read
// of the temporaries among its arguments (bpf/pyread.h py_frame_push): an
// argument only the caller's stack held dies with the call, before the pop
// that reads the rest. A stack per site and thread, one item per entry
// (nil where the entry read nothing), so that an exit takes its own entry's.
type pushedReads map[callKey][]*loader.PyCallRead

// maxPushed bounds a stack: a recursion deeper than this loses its
// outermost calls' temporaries, never another call's.
const maxPushed = 64

func (m pushedReads) entry(k callKey, r *loader.PyCallRead) {
	s := append(m[k], r)
	if len(s) > maxPushed {
		s = slices.Delete(s, 0, len(s)-maxPushed)
	}
	m[k] = s
}

// exit takes the innermost open call's entry read.
func (m pushedReads) exit(k callKey) *loader.PyCallRead {
	s := m[k]
	if len(s) == 0 {
		return nil
	}
	r := s[len(s)-1]
	if len(s) == 1 {
		delete(m, k)
	} else {
		m[k] = s[:len(s)-1]
	}
	return r
}

func (m pushedReads) forget(tid uint32) {
	for k := range m {
		if k.tid == tid {
			delete(m, k)
		}
	}
}

// withPushed is read with each field the pop found freed at its start (the
// argument itself) taken from pushed, where pushed read that very object:
// its address is the one the pop found freed, and the callee's frame held
// it from the push to the pop, so no other object had it between. It
// returns how many fields it took.
func withPushed(read, pushed *loader.PyCallRead) (*loader.PyCallRead, int) {
	if read == nil || read.Err != nil || pushed == nil || pushed.Err != nil || len(pushed.Fields) != len(read.Fields) {
		return read, 0
	}
	var out *loader.PyCallRead
	n := 0
	for i, f := range read.Fields {
		p := pushed.Fields[i]
		if addr, freed := f.Err.FreedObject(); !freed || p.Err != nil || p.Root == 0 || addr != p.Root {
			continue
		}
		if out == nil {
			out = &loader.PyCallRead{Fields: slices.Clone(read.Fields)}
		}
		out.Fields[i] = p
		n++
	}
	if out == nil {
		return read, 0
	}
	return out, n
}
