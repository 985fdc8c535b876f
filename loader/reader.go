package loader

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
)

// Layout of struct event in bpf/stage.c.
const (
	eventSize = 88
	offValues = 24
	offStr    = 56
)

// ReadStats counts what the reader saw beyond the events themselves.
type ReadStats struct {
	Events      uint64
	ReadFailed  uint64 // values the BPF program could not read (bad pointer in the spec?)
	UnknownSite uint64
	// WatchIgnored counts watchpoint hits that were no call: f.__code__
	// reads, objects freed, the freed code object's memory reused.
	WatchIgnored uint64
}

// Run reads events in the order the probes fired and hands each to handle,
// calling tick every interval. The BPF side wakes the reader only in batches,
// so a timed drain picks up the rest. It returns when stop closes (exited
// false) or when the target process is gone (exited true), after draining
// everything that was queued.
func (s *Session) Run(stop <-chan struct{}, interval time.Duration, handle func(*spanbuilder.Event), tick func()) (exited bool, err error) {
	pidfd, err := unix.PidfdOpen(s.PID, 0)
	if err != nil {
		return true, nil // already gone
	}
	defer unix.Close(pidfd)
	var rec ringbuf.Record
	var ev spanbuilder.Event
	next := time.Now().Add(interval)
	for {
		s.reader.SetDeadline(next)
		err := s.reader.ReadInto(&rec)
		switch {
		case err == nil:
			if s.decode(rec.RawSample, &ev) {
				handle(&ev)
			}
			continue
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return false, err
		}
		next = time.Now().Add(interval)
		tick()
		if processGone(pidfd) {
			s.Drain(handle)
			return true, nil
		}
		select {
		case <-stop:
			s.Drain(handle)
			return false, nil
		default:
		}
	}
}

// Drain hands every event queued right now to handle.
func (s *Session) Drain(handle func(*spanbuilder.Event)) {
	var rec ringbuf.Record
	var ev spanbuilder.Event
	s.reader.SetDeadline(time.Now())
	for s.reader.ReadInto(&rec) == nil {
		if s.decode(rec.RawSample, &ev) {
			handle(&ev)
		}
	}
}

func processGone(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

func (s *Session) decode(raw []byte, ev *spanbuilder.Event) bool {
	if len(raw) < eventSize {
		return false
	}
	s.Stats.Events++
	site := binary.LittleEndian.Uint32(raw[16:])
	if raw[20] == boundaryWatch {
		return s.decodeWatch(raw, site, ev)
	}
	if int(site) >= len(s.Targets) {
		s.Stats.UnknownSite++
		return false
	}
	b := probes.Boundary(raw[20])
	failed := raw[21]
	*ev = spanbuilder.Event{
		BootNs: binary.LittleEndian.Uint64(raw[0:]),
		PID:    binary.LittleEndian.Uint32(raw[8:]),
		TID:    binary.LittleEndian.Uint32(raw[12:]),
		Site:   int(site),
		Exit:   b == probes.Exit,
	}
	for i, nv := range s.values[site][b&1] {
		if failed&(1<<i) != 0 {
			s.Stats.ReadFailed++
			continue
		}
		raw64 := binary.LittleEndian.Uint64(raw[offValues+8*i:])
		if nv.Name == "" {
			ev.RequestID = requestID(nv.Value, raw64, raw[offStr:eventSize])
			continue
		}
		ev.Values[ev.NValues] = spanbuilder.Value{Name: nv.Name, V: nv.Value.Convert(raw64)}
		ev.NValues++
	}
	return true
}

const boundaryWatch = 2

// decodeWatch turns a watchpoint hit into an entry or an exit by the change of
// the reference count since the last hit on that code object.
func (s *Session) decodeWatch(raw []byte, site uint32, ev *spanbuilder.Event) bool {
	if raw[21] != 0 {
		s.Stats.ReadFailed++
		return false
	}
	val := binary.LittleEndian.Uint64(raw[offValues:])
	ip := binary.LittleEndian.Uint64(raw[offValues+8:])
	last, known := s.refcnt[site]
	if !known || binary.LittleEndian.Uint64(raw[offStr:]) != s.watchAddr[site] {
		return false // disarmed (the code object was freed), or queued from one since replaced
	}
	s.refcnt[site] = val
	if val == 0 {
		// Freed: its memory will be reused, and writes there mean nothing.
		s.disarmSite(site)
		return false
	}
	if val == last {
		return false
	}
	exit := val < last
	tid := binary.LittleEndian.Uint32(raw[12:])
	if s.tentative == nil {
		s.tentative = map[watchKey]int{}
	}
	if s.open == nil {
		s.open = map[watchKey]int{}
	}
	k := watchKey{site, tid}
	c := s.ipClass(ip)
	if s.otherReference(raw, k, c, exit, ip) {
		s.Stats.WatchIgnored++
		return false
	}
	cancel := false
	switch {
	case c == ipPush && !exit && s.inEvalLoop(ip), c == ipUnknown && !exit:
		// The eval loop both pushes frames inline (3.11+) and takes
		// references to the code object for other reasons (f.__code__
		// held in a variable): a tentative entry until a pop closes it.
		// So is a +1 from code without a symbol (a stripped interpreter:
		// func_get_code has none on Debian's 3.11, but the eval loop that
		// drops the reference again is exported and withdraws it).
		s.tentative[k]++
	case exit && (c == ipOther || c == ipPush):
		// A reference dropped outside a frame pop: it ends a reference
		// the eval loop took, not a call; that entry is withdrawn.
		if s.tentative[k] == 0 {
			s.Stats.WatchIgnored++
			return false
		}
		s.tentative[k]--
		cancel = true
	case c == ipOther, c == ipIgnore:
		s.Stats.WatchIgnored++
		return false
	case c == ipPush && exit, c == ipPop && !exit:
		s.Stats.WatchIgnored++
		return false
	case exit:
		if s.tentative[k] > 0 {
			s.tentative[k]-- // the entry it closes was a push
		}
	}
	if !exit {
		s.open[k]++
	} else if s.open[k] > 0 {
		s.open[k]--
	}
	*ev = spanbuilder.Event{
		BootNs: binary.LittleEndian.Uint64(raw[0:]),
		PID:    binary.LittleEndian.Uint32(raw[8:]),
		TID:    binary.LittleEndian.Uint32(raw[12:]),
		Site:   int(site),
		Exit:   exit,
		Cancel: cancel,
	}
	ev.Values[0] = spanbuilder.Value{Name: "ip", V: int64(ip)}
	ev.NValues = 1
	// The thread's exception being raised, when its slot is known: set at a
	// frame's pop, the call is ending by that exception.
	if exc := binary.LittleEndian.Uint64(raw[offValues+16:]); exit && raw[offValues+24]&1 != 0 && exc != 0 {
		ev.Err = "raised an exception"
		ev.Values[1] = spanbuilder.Value{Name: "exception", V: int64(exc)}
		ev.NValues = 2
	}
	return true
}

// otherReference tells, from the frames of the function watch_hit counted
// on the thread's stack, a write that is no push or pop of k's calls.
func (s *Session) otherReference(raw []byte, k watchKey, c ipClass, exit bool, ip uint64) bool {
	n := int(raw[offValues+25])
	if raw[offValues+24]&2 == 0 {
		return false // not counted
	}
	// One returning on 3.11 is cleared while still the current frame: it
	// runs no more.
	frames := n / 2
	if exit && n%2 == 1 && s.popsCurrentFrame && !s.inEvalLoop(ip) {
		frames--
	}
	switch {
	case exit:
		// No call open here (a reference dropped at shutdown), or the
		// function still has a frame on this thread for every call open
		// there: the reference dropped was held elsewhere (a frame of
		// logging's findCaller holding f.f_code being cleared).
		return frames >= s.open[k]
	case c == ipUnknown:
		// Without a symbol, a reference taken while the function runs here
		// (f.f_code, sys._getframe()) cannot be told from a recursive
		// call: taken as a reference.
		return frames > 0
	}
	return false
}

type watchKey struct {
	site, tid uint32
}

// inEvalLoop tells whether ip is in the interpreter's eval loop.
func (s *Session) inEvalLoop(ip uint64) bool {
	fn, _, _ := strings.Cut(s.symbolizer.Name(ip), "+")
	return fn == "_PyEval_EvalFrameDefault"
}

// ipClass sorts an instruction pointer once, by the function it is in.
func (s *Session) ipClass(ip uint64) ipClass {
	if s.ipClasses == nil {
		s.ipClasses = map[uint64]ipClass{}
	}
	c, ok := s.ipClasses[ip]
	if !ok {
		c = ipUnknown
		if s.symbolizer != nil {
			c = classifyIP(s.symbolizer.Name(ip), s.frameObjectOwnsCode)
		}
		s.ipClasses[ip] = c
	}
	return c
}

func requestID(v *probes.Value, raw uint64, str []byte) string {
	if v.Type == probes.TypeString {
		n := 0
		for n < len(str) && str[n] != 0 {
			n++
		}
		return string(str[:n])
	}
	return strconv.FormatInt(v.Convert(raw), 10)
}

// Sites describes the armed sites for the span builder, in cookie order.
func (s *Session) Sites() []spanbuilder.Site {
	out := make([]spanbuilder.Site, len(s.Targets))
	for i, t := range s.Targets {
		out[i] = spanbuilder.Site{Stage: t.Stage.Name, Batch: t.Stage.Scope == probes.ScopeBatch}
	}
	return append(out, s.pySites()...)
}
