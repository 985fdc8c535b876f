package tracer

import (
	"fmt"
	"time"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanbuilder"
)

// userReads reads a Python stage's values from user space, for the paths
// the BPF reader cannot express (attach names them). The reads race the
// call: they are taken while the call runs (its frame holds the batch it
// was given and the thread is busy inside it) and count only if the call's
// exit came after they ended; else the call names no request (counted as
// late) rather than maybe the wrong ones.
type userReads struct {
	proc *pyproc.Process
	held map[uint32]heldCounts // accepted counts read from a caller, until the thread's next event
	// Time slept waiting for frames since waitSince (findEntered).
	waitSince time.Time
	waited    time.Duration
}

type pendingRead struct {
	rids   []string
	counts []int64 // accept stages
	end    uint64  // boot ns when the reads ended
	err    error
	skip   bool // left out by the stage's when
}

// handle is pyCalls.handle for a stage read from user space.
func (u *userReads) handle(p *pyCalls, t *loader.PyTarget, e *spanbuilder.Event, span bool) bool {
	name := t.Stage.Name
	if t.Stage.Requests == nil {
		return span
	}
	key := callKey{e.Site, e.TID}
	if e.Cancel {
		// Not a call: its reads mean nothing. One the builder never saw
		// (left out by when) must not withdraw another call there.
		r, ok := p.pop(key)
		return span && !(ok && r.skip)
	}
	if name == probes.Accept {
		u.accept(p, t, e, key)
		return false
	}
	if !e.Exit {
		rids, keep, err := u.read(p, t, int(e.TID), e.BootNs)
		end := spanbuilder.BootNow()
		p.Stats.MaxLag = max(p.Stats.MaxLag, time.Duration(end-e.BootNs))
		p.Stats.SumLag += time.Duration(end - e.BootNs)
		p.push(key, pendingRead{rids: rids, end: end, err: err, skip: !keep})
		if !keep {
			p.Stats.Skipped++
			if err != nil {
				p.fail(name+": when", err)
			}
		}
		return span && keep
	}
	r, ok := p.pop(key)
	if ok && r.skip {
		if r.err != nil {
			p.unsure(name, e.TID, e.BootNs)
		}
		return false // left out by the stage's when, entry and exit
	}
	good := false
	// A call whose requests could not be read serves none: another call of
	// the step may have had another batch (vLLM's draft is the next step's).
	e.Requests = []string{}
	switch {
	case !ok:
	case r.err != nil:
		p.fail(name, r.err)
	case e.BootNs < r.end:
		// The call had returned before the reads ended: they may have seen
		// the next batch. Better no requests than wrong ones.
		p.Stats.Late++
	default:
		p.Stats.Reads++
		e.Requests = r.rids
		good = true
	}
	p.served(t, e, good)
	return span
}

// accept reads an accept stage's counts: from its caller's frame as it
// returns (read_from), or from its own frame while it runs.
func (u *userReads) accept(p *pyCalls, t *loader.PyTarget, e *spanbuilder.Event, key callKey) {
	switch {
	case p.match == nil:
	case t.ReadFrom != nil && e.Exit:
		u.accepted(t, int(e.TID), e.BootNs)
	case t.ReadFrom == nil && !e.Exit:
		var r pendingRead
		if frame, err := u.findEntered(p, int(e.TID), t.Code.Addr, e.BootNs); err != nil {
			r.err = err
		} else {
			r.rids, r.counts, r.err = u.readCounts(frame, t.Stage)
		}
		r.end = spanbuilder.BootNow()
		p.push(key, r)
	case t.ReadFrom == nil:
		r, ok := p.pop(key)
		switch {
		case !ok:
			r.err = fmt.Errorf("no read at its entry")
		case r.err == nil && e.BootNs < r.end:
			r.err = fmt.Errorf("returned before the reads ended")
		}
		p.applyCounts(e.TID, e.BootNs, r.rids, r.counts, r.err)
	}
}

// push keeps a call's read until its exit; an entry whose exit never came
// (the target died mid-call, say) must not grow the stack without bound.
func (p *pyCalls) push(key callKey, r pendingRead) {
	st := p.pending[key]
	if len(st) >= maxNesting {
		st = st[1:]
	}
	p.pending[key] = append(st, r)
}

const maxNesting = 64

// pop takes the read of the latest call of key still open: an exit ends the
// innermost call (frames pop in order).
func (p *pyCalls) pop(key callKey) (pendingRead, bool) {
	st := p.pending[key]
	if len(st) == 0 {
		return pendingRead{}, false
	}
	r := st[len(st)-1]
	if len(st) == 1 {
		delete(p.pending, key)
	} else {
		p.pending[key] = st[:len(st)-1]
	}
	return r, true
}

// read reads a call's requests as it starts; keep is false for a call the
// stage's when leaves out, or whose when could not be read (it might be one
// to leave out: better no span than one for the wrong kind of call).
func (u *userReads) read(p *pyCalls, t *loader.PyTarget, tid int, hit uint64) (rids []string, keep bool, err error) {
	spec := t.Stage.Requests
	frame, err := u.findEntered(p, tid, t.Code.Addr, hit)
	if err != nil {
		return nil, t.Stage.When == nil, err
	}
	if c := t.Stage.When; c != nil {
		if ok, err := u.holds(frame, c); err != nil || !ok {
			return nil, false, err
		}
	}
	rids, err = u.evalIDs(frame, spec.Arg, spec.IDPath())
	return rids, true, err
}

// holds tells whether a call's value at c is one of c.Equals.
func (u *userReads) holds(frame *pyproc.Frame, c *probes.PyCond) (bool, error) {
	obj, err := u.proc.Local(frame, c.Arg)
	if err != nil {
		return false, err
	}
	v, err := u.proc.Eval(obj, c.Path)
	if err != nil {
		return false, err
	}
	ok, err := (&pyCalls{}).oneOf(v, c.Equals)
	if err != nil {
		return false, fmt.Errorf("%s.%s: %w", c.Arg, c.Path, err)
	}
	return ok, nil
}

// findEntered finds the frame of a call that entered at hit (boot ns). The
// watchpoint fires when the frame is made, a moment before the thread links
// it into its stack; a thread preempted in between shows the caller on top
// for a while. A new thread may not be in the thread list yet, and a walk
// of a stack that changes under it can meet a frame being torn down. So the
// lookup is tried again, but only soon after the hit, and the waits are
// bounded to a twentieth of the time: an entry that is no call (f.__code__
// read in a loop) never finds its frame, and must not make the reader fall
// behind on the calls.
func (u *userReads) findEntered(p *pyCalls, tid int, code, hit uint64) (*pyproc.Frame, error) {
	const retryFor, share = 2 * time.Millisecond, 20
	for wait := 25 * time.Microsecond; ; wait *= 2 {
		frame, err := u.proc.FindFrame(tid, code)
		now := time.Now()
		if now.Sub(u.waitSince) > time.Second {
			u.waitSince, u.waited = now, 0
		}
		if err == nil || time.Duration(spanbuilder.BootNow()-hit)+wait > retryFor || u.waited+wait > time.Second/share {
			return frame, err
		}
		p.Stats.Retries++
		u.waited += wait
		time.Sleep(wait)
	}
}

// idList reads a path ending in every request's id (reqs[*].rid); a path
// ending in one id (self.path) names one request.
func idList(proc *pyproc.Process, obj uint64, path string) ([]string, error) {
	v, err := proc.Eval(obj, path)
	if err != nil {
		return nil, err
	}
	var items []pyproc.Value
	switch x := v.(type) {
	case []pyproc.Value:
		items = x
	case string, int64, uint64: // a call that serves one request
		items = []pyproc.Value{x}
	default:
		return nil, fmt.Errorf("%s: expected a list of requests or one str or int id, got %T", path, v)
	}
	rids := make([]string, len(items))
	for i, it := range items {
		switch x := it.(type) {
		case string:
			rids[i] = x
		case int64, uint64:
			rids[i] = fmt.Sprint(x)
		default:
			return nil, fmt.Errorf("%s: item %d: expected a str or int id, got %T", path, i, it)
		}
	}
	return rids, nil
}

// accepted reads, as an accept stage returns, the accepted counts from the
// frame of its caller, which is still running. They are held until the
// thread's next watched event: one that came before the reads ended means
// the thread had gone on, and the caller's frame found may have been its
// next call (the next step's batch and counts), so the counts are dropped.
func (u *userReads) accepted(t *loader.PyTarget, tid int, at uint64) {
	frame, err := u.proc.FindFrame(tid, t.ReadFrom.Addr)
	h := heldCounts{at: at}
	if err == nil {
		h.rids, h.counts, err = u.readCounts(frame, t.Stage)
	}
	h.err, h.end = err, spanbuilder.BootNow()
	u.held[uint32(tid)] = h
}

// heldCounts are accepted counts read as an accept stage returned.
type heldCounts struct {
	rids   []string
	counts []int64
	err    error
	at     uint64 // boot ns of the accept's return
	end    uint64 // boot ns when the reads ended
}

// release applies the counts held for tid, now that its next watched event
// (at boot ns at) came, if that was after the reads ended.
func (u *userReads) release(p *pyCalls, tid uint32, at uint64) {
	h, ok := u.held[tid]
	if !ok {
		return
	}
	delete(u.held, tid)
	if h.err == nil && at < h.end {
		h.err = fmt.Errorf("the thread had gone on before the reads of the caller's frame ended")
	}
	p.applyCounts(tid, h.at, h.rids, h.counts, h.err)
}

// readCounts evaluates an accept stage's lists in frame: each request's
// accepted count, or NoDrafts.
func (u *userReads) readCounts(frame *pyproc.Frame, st *probes.Stage) ([]string, []int64, error) {
	rids, err := u.evalIDs(frame, st.Requests.Arg, st.Requests.IDPath())
	if err != nil {
		return nil, nil, err
	}
	counts, err := u.evalCounts(frame, st.Accepted)
	if err != nil {
		return nil, nil, err
	}
	var drafted []string
	if st.Drafted != nil {
		if drafted, err = u.evalIDs(frame, st.Drafted.Arg, st.Drafted.Path); err != nil {
			return nil, nil, err
		}
	}
	return assembleCounts(rids, counts, st.Drafted != nil, drafted)
}

func (u *userReads) evalIDs(frame *pyproc.Frame, arg, path string) ([]string, error) {
	obj, err := u.proc.Local(frame, arg)
	if err != nil {
		return nil, err
	}
	return idList(u.proc, obj, path)
}

// evalCounts reads an accepted-count list: the items, or with Len each
// item's length, plus Add, less Sub (PyList.Count).
func (u *userReads) evalCounts(frame *pyproc.Frame, l *probes.PyList) ([]int64, error) {
	v, err := u.eval(frame, l)
	if err != nil {
		return nil, err
	}
	var sub int64
	if l.Sub != nil {
		if sub, err = u.evalInt(frame, l.Sub); err != nil {
			return nil, err
		}
	}
	items, ok := v.([]pyproc.Value)
	if !ok {
		return nil, fmt.Errorf("%s: expected a list, got %T", l.Path, v)
	}
	out := make([]int64, len(items))
	for i, it := range items {
		if l.Len {
			list, ok := it.([]pyproc.Value)
			if !ok {
				return nil, fmt.Errorf("%s: item %d: expected a list to take the length of, got %T", l.Path, i, it)
			}
			out[i] = l.Count(int64(len(list)), sub)
			continue
		}
		n, ok := it.(int64)
		if !ok {
			return nil, fmt.Errorf("%s: item %d: expected an int, got %T", l.Path, i, it)
		}
		out[i] = l.Count(n, sub)
	}
	return out, nil
}

// eval reads l.Arg's l.Path in frame.
func (u *userReads) eval(frame *pyproc.Frame, l *probes.PyList) (pyproc.Value, error) {
	obj, err := u.proc.Local(frame, l.Arg)
	if err != nil {
		return nil, err
	}
	return u.proc.Eval(obj, l.Path)
}

// evalInt reads one int (a count's sub).
func (u *userReads) evalInt(frame *pyproc.Frame, l *probes.PyList) (int64, error) {
	v, err := u.eval(frame, l)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%s: expected an int, got %T", l.Path, v)
	}
	return n, nil
}
