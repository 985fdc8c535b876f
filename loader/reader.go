package loader

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/bpfring"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
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

// Add adds o's counts (another process of the same server).
func (s *ReadStats) Add(o ReadStats) {
	s.Events += o.Events
	s.ReadFailed += o.ReadFailed
	s.UnknownSite += o.UnknownSite
	s.WatchIgnored += o.WatchIgnored
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
	var raw []byte
	var ev spanbuilder.Event
	next := time.Now().Add(interval)
	for {
		s.reader.SetDeadline(next)
		err := s.reader.ReadInto(&raw)
		switch {
		case err == bpfring.ErrStuck:
			s.lost(raw)
			continue
		case err == nil:
			s.deliver(raw, &ev, handle)
			// A target that writes faster than this reads never lets the
			// ring run dry: the interval falls due by the clock as well, or
			// stop and tick would wait for a lull that may never come.
			if time.Now().Before(next) {
				continue
			}
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return false, err
		}
		next = time.Now().Add(interval)
		tick()
		if processGone(pidfd) {
			// No program of the target's runs any more: a record still
			// busy is one the ring will step over after StuckAfter, and
			// what follows it is read.
			s.drain(handle, bpfring.StuckAfter+10*time.Millisecond)
			s.finish(handle)
			return true, nil
		}
		select {
		case <-stop:
			s.Drain(handle)
			s.finish(handle)
			return false, nil
		default:
		}
	}
}

// Drain hands on the events queued when it starts, and no more: a target
// writing faster than this reads would otherwise keep it here for good.
// It stops at a record still being written (the next read has it).
func (s *Session) Drain(handle func(*spanbuilder.Event)) { s.drain(handle, 0) }

// drain is Drain waiting up to wait for a record being written.
func (s *Session) drain(handle func(*spanbuilder.Event), wait time.Duration) {
	var raw []byte
	var ev spanbuilder.Event
	left := s.reader.AvailableBytes()
	s.reader.SetDeadline(time.Now().Add(wait))
	for left > 0 {
		switch err := s.reader.ReadInto(&raw); err {
		case nil:
			s.deliver(raw, &ev, handle)
		case bpfring.ErrStuck:
			s.lost(raw)
		default:
			return
		}
		left -= bpfring.RecordBytes(len(raw))
	}
}

// deliver decodes a record and hands on what it made: first the events it
// completed of earlier hits, then its own.
func (s *Session) deliver(raw []byte, ev *spanbuilder.Event, handle func(*spanbuilder.Event)) {
	ok := s.decode(raw, ev)
	for i := range s.pending {
		handle(&s.pending[i])
	}
	s.pending = s.pending[:0]
	if ok {
		handle(ev)
	}
}

// finish hands on the calls still waiting for the rest of their payload:
// the session ends, and it will not come.
func (s *Session) finish(handle func(*spanbuilder.Event)) {
	for _, e := range s.py.flush() {
		handle(&e)
	}
}

func processGone(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// decode turns one ring-buffer record into an event; false when it makes
// none (a watchpoint hit that was no call, a record continuing another).
func (s *Session) decode(raw []byte, ev *spanbuilder.Event) bool {
	kind, ok := recordKind(raw)
	if !ok {
		return false
	}
	s.Stats.Events++
	switch kind {
	case kindEntry, kindExit:
		r, str, snap, ok := stageRecord(raw)
		if !ok || !s.decodeStage(r, str, ev) {
			return false
		}
		ev.CUDA = cudaCount(snap)
		return true
	case kindWatch, kindPyData:
		w, payload, ok := watchRecord(raw)
		return ok && s.decodeWatch(w, payload, ev)
	}
	s.Stats.UnknownSite++
	return false
}

func (s *Session) decodeStage(r *bpf.StageEvent, str []int8, ev *spanbuilder.Event) bool {
	site := r.Site
	if int(site) >= len(s.Targets) {
		s.Stats.UnknownSite++
		return false
	}
	b := probes.Entry
	if r.Kind == kindExit {
		b = probes.Exit
	}
	*ev = spanbuilder.Event{BootNs: r.BootNs, PID: r.Pid, TID: r.Tid, Site: int(site), Exit: b == probes.Exit, Dropped: uint32(r.Dropped) + s.takeDrops(r.Tid)}
	for i, nv := range s.values[site][b] {
		if r.Failed&(1<<i) != 0 {
			s.Stats.ReadFailed++
			continue
		}
		raw64 := r.Values[i]
		if nv.Name == "" {
			ev.RequestID = requestID(nv.Value, raw64, str)
			continue
		}
		ev.Values[ev.NValues] = spanbuilder.Value{Name: nv.Name, V: nv.Value.Convert(raw64)}
		ev.NValues++
	}
	return true
}

// decodeWatch turns a watchpoint hit into an entry or an exit
// (watchDecoder), with the values read at a call's pop, which may continue
// in the records that follow on the same thread.
func (s *Session) decodeWatch(w *bpf.StageWatchEvent, payload []byte, ev *spanbuilder.Event) bool {
	if w.Kind == kindPyData {
		return s.py.more(w, payload, ev)
	}
	if w.Flags&wDropped != 0 {
		// Carried by the thread's next event, whatever this hit turns out to be.
		s.noteDrop(w.Tid)
	}
	if held, ok := s.py.abandon(w.Tid); ok {
		// The thread's next hit came before the last record of the one
		// held: its payload was cut (a record lost to a full ring).
		s.pending = append(s.pending, held)
	}
	if w.Flags&wRefcntFailed != 0 {
		s.Stats.ReadFailed++
		return false
	}
	switch s.hits.classify(w) {
	case HitStale, HitIgnored:
		s.Stats.WatchIgnored = s.hits.Ignored
		return false
	case HitFreed:
		s.disarmSite(w.Site)
		return false
	case HitEntry:
		*ev = s.watchEvent(w, false)
		ev.Tentative = s.hits.Tentative
	case HitExit:
		*ev = s.watchEvent(w, true)
		ev.Depth = s.hits.popDepth(w)
	case HitCancel:
		*ev = s.watchEvent(w, true)
		ev.Cancel = true
	}
	ev.Dropped = s.takeDrops(w.Tid)
	if ev.Exit && !ev.Cancel || !ev.Exit && w.Flags&wPayload != 0 {
		// An exit's reads, or an entry's temporaries (py_frame_push).
		return s.py.start(w, payload, ev)
	}
	return true
}

// watchEvent makes the event of a hit classified as an entry or exit.
func (s *Session) watchEvent(w *bpf.StageWatchEvent, exit bool) spanbuilder.Event {
	ev := spanbuilder.Event{BootNs: w.BootNs, PID: w.Pid, TID: w.Tid, Site: int(w.Site), Exit: exit}
	if w.Flags&wCUDA != 0 {
		ev.CUDA = cudaCount(&w.Cuda)
	}
	ev.Values[0] = spanbuilder.Value{Name: "ip", V: int64(w.Ip)}
	ev.NValues = 1
	// The thread's exception being raised, when its slot is known: set at a
	// frame's pop, the call is ending by that exception.
	if exit && w.Flags&wExcKnown != 0 && w.Exc != 0 {
		ev.Err = "raised an exception"
		ev.Values[1] = spanbuilder.Value{Name: "exception", V: int64(w.Exc)}
		ev.NValues = 2
	}
	return ev
}

func requestID(v *probes.Value, raw uint64, str []int8) string {
	if v.Type == probes.TypeString {
		return cString(str)
	}
	return strconv.FormatInt(v.Convert(raw), 10)
}

// cString is the NUL-terminated string at the start of b.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// Sites describes the armed sites for the span builder, in cookie order.
func (s *Session) Sites() []spanbuilder.Site {
	out := make([]spanbuilder.Site, len(s.Targets))
	for i, t := range s.Targets {
		out[i] = spanbuilder.Site{Stage: t.Stage.Name, Batch: t.Stage.Scope == probes.ScopeBatch, Native: true, Boundary: t.Stage.BoundaryName()}
	}
	return append(out, s.pySites()...)
}

// lost notes a record the ring stepped over, never committed, for its
// thread: every record begins boot_ns, pid, tid (bpf/stage.c).
func (s *Session) lost(raw []byte) {
	if len(raw) >= 16 {
		s.noteDrop(binary.LittleEndian.Uint32(raw[12:]))
	}
}

// noteDrop: an event of thread tid was lost (a hit said so, or the ring
// stepped over its record); the thread's next event carries it.
func (s *Session) noteDrop(tid uint32) {
	if s.dropNotes == nil {
		s.dropNotes = map[uint32]uint32{}
	}
	s.dropNotes[tid]++
}

// takeDrops is what thread tid lost since its last event.
func (s *Session) takeDrops(tid uint32) uint32 {
	if len(s.dropNotes) == 0 {
		return 0 // every event asks: the usual answer costs no lookup
	}
	n := s.dropNotes[tid]
	if n > 0 {
		delete(s.dropNotes, tid)
	}
	return n
}
