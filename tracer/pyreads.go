package tracer

import (
	"fmt"
	"slices"
	"time"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanbuilder"
)

// pyRequests reads, for Python stages, which requests a call serves, while
// the call still runs: its frame holds the batch it was given and the thread
// is busy inside it, so the object graph is not changing under the reads.
// The reads count only if the call's exit came after they ended; else the
// call names no request (counted as late) rather than maybe the wrong ones.
//
// Accepted counts that reach the host a loop later (an accept stage) are
// matched to verifies first in, first out per request. That is exact only for
// a request whose every verify was traced: one first seen in the first step
// traced on its thread, or right after a step whose requests could not be
// read, may have had a verify before, and gets no counts. A count that could
// not be read stops the matching of everyone rather than shift later counts.
type pyRequests struct {
	proc    *pyproc.Process
	sess    *loader.Session
	late    *spanbuilder.LateAccept   // nil without an accept stage
	pending map[callKey][]pendingRead // a stack: a recursive stage's calls nest
	held    map[uint32]heldCounts     // accepted counts until the thread's next event
	// With the spec's same_batch: the requests a call of the thread's
	// current step read (nil map without same_batch), and the order of the
	// stage last entered, to tell when a step begins.
	stepRids map[uint32][]string
	lastOrd  map[uint32]int
	// Time slept waiting for frames since waitSince (findEntered).
	waitSince time.Time
	waited    time.Duration
	seen      map[string]bool // requests named by some step already
	doubt     map[uint32]bool // the next step's new requests may predate tracing
	Stats     PyStats
}

// PyStats counts what the Python side could and could not read.
type PyStats struct {
	Reads, Late, Failed uint64
	// Calls left out by a stage's when (or whose when could not be read).
	Skipped uint64
	// Calls whose own read failed that took the requests another call of
	// their step read (the spec's same_batch).
	FromStep uint64
	// Frame lookups tried again: the call's frame not yet on its thread's
	// stack, or the stack changing under the walk.
	Retries uint64
	// From the watchpoint hit to the end of the reads.
	MaxLag, SumLag time.Duration
	// Accepted counts: verifies that got theirs, and that went without
	// (request already decoding when tracing began, or a step that could
	// not be attributed).
	Matched, Unmatched uint64
	AcceptedDrafts     int64 // over the matched verifies
	LastError          string
	// Code objects followed to their replacement (reload, reassignment).
	Replaced int
}

type callKey struct {
	site int
	tid  uint32
}

type pendingRead struct {
	rids   []string
	counts []int64 // accept stages
	end    uint64  // boot ns when the reads ended
	err    error
	skip   bool // left out by the stage's when
}

func newPyRequests(proc *pyproc.Process, sess *loader.Session, late *spanbuilder.LateAccept) *pyRequests {
	return &pyRequests{proc: proc, sess: sess, late: late, pending: map[callKey][]pendingRead{}, held: map[uint32]heldCounts{}, lastOrd: map[uint32]int{},
		seen: map[string]bool{}, doubt: map[uint32]bool{}}
}

// handle reads at a Python stage call's entry (an accept stage's at its
// exit) and hands the requests to the builder with the exit; it returns
// false for events that make no span.
func (p *pyRequests) handle(e *spanbuilder.Event) bool {
	t, ok := p.sess.PySite(e.Site)
	if !ok {
		return true
	}
	p.release(e.TID, e.BootNs)
	name := t.Stage.Name
	if p.stepRids != nil && !e.Exit && !e.Cancel {
		// A stage earlier than the last one entered begins the next step.
		ord := slices.Index(probes.StageNames, name)
		if ord < p.lastOrd[e.TID] {
			delete(p.stepRids, e.TID)
		}
		p.lastOrd[e.TID] = ord
	}
	span := name != probes.Accept
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
		switch {
		case t.ReadFrom != nil && e.Exit:
			p.accepted(t, int(e.TID))
		case t.ReadFrom == nil && p.late != nil && !e.Exit:
			// Counts in the call's own frame: read while it runs, kept if
			// it was still running when the reads ended.
			var r pendingRead
			if frame, err := p.findEntered(int(e.TID), t.Code.Addr, e.BootNs); err != nil {
				r.err = err
			} else {
				r.rids, r.counts, r.err = p.readCounts(frame, t.Stage)
			}
			r.end = spanbuilder.BootNow()
			p.push(key, r)
		case t.ReadFrom == nil && p.late != nil:
			r, ok := p.pop(key)
			switch {
			case !ok:
				r.err = fmt.Errorf("no read at its entry")
			case r.err == nil && e.BootNs < r.end:
				r.err = fmt.Errorf("returned before the reads ended")
			}
			p.applyCounts(r.rids, r.counts, r.err)
		}
		return false
	}
	if !e.Exit {
		rids, keep, err := p.read(t, int(e.TID), e.BootNs)
		end := spanbuilder.BootNow()
		p.Stats.MaxLag = max(p.Stats.MaxLag, time.Duration(end-e.BootNs))
		p.Stats.SumLag += time.Duration(end - e.BootNs)
		p.push(key, pendingRead{rids: rids, end: end, err: err, skip: !keep})
		if !keep {
			p.Stats.Skipped++
			if err != nil {
				p.Stats.Failed++
				p.Stats.LastError = fmt.Sprintf("%s: when: %v", name, err)
			}
		}
		return span && keep
	}
	r, ok := p.pop(key)
	if ok && r.skip {
		if r.err != nil {
			// Maybe a call the spec wants (when unreadable): its verify,
			// if it was one, has no span, and a late count must not land
			// on the next.
			p.track(name, e.TID, false, nil)
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
		p.Stats.Failed++
		p.Stats.LastError = fmt.Sprintf("%s: %v", name, r.err)
	case e.BootNs < r.end:
		// The call had returned before the reads ended: they may have seen
		// the next batch. Better no requests than wrong ones.
		p.Stats.Late++
	default:
		p.Stats.Reads++
		e.Requests = r.rids
		good = true
	}
	if rids, ok := p.stepRids[e.TID]; ok && !good {
		// Another call of this step read its batch (same_batch): this
		// call served the same requests.
		e.Requests, r.rids, good = rids, rids, true
		p.Stats.FromStep++
	} else if good && p.stepRids != nil {
		p.stepRids[e.TID] = r.rids
	}
	if e.Err == "" {
		// A call that raised is not the step's: the retry that follows is.
		p.track(name, e.TID, good, r.rids)
	}
	return span
}

// push keeps a call's read until its exit; an entry whose exit never came
// (the target died mid-call, say) must not grow the stack without bound.
func (p *pyRequests) push(key callKey, r pendingRead) {
	st := p.pending[key]
	if len(st) >= maxNesting {
		st = st[1:]
	}
	p.pending[key] = append(st, r)
}

const maxNesting = 64

// pop takes the read of the latest call of key still open: an exit ends the
// innermost call (frames pop in order).
func (p *pyRequests) pop(key callKey) (pendingRead, bool) {
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
func (p *pyRequests) read(t *loader.PyTarget, tid int, hit uint64) (rids []string, keep bool, err error) {
	spec := t.Stage.Requests
	frame, err := p.findEntered(tid, t.Code.Addr, hit)
	if err != nil {
		return nil, t.Stage.When == nil, err
	}
	if c := t.Stage.When; c != nil {
		if ok, err := p.holds(frame, c); err != nil || !ok {
			return nil, false, err
		}
	}
	rids, err = p.evalIDs(frame, spec.Arg, spec.IDPath())
	return rids, true, err
}

// holds tells whether a call's value at c equals c.Equals (compared as
// written: an int's digits, a str's text).
func (p *pyRequests) holds(frame *pyproc.Frame, c *probes.PyCond) (bool, error) {
	obj, err := p.proc.Local(frame, c.Arg)
	if err != nil {
		return false, err
	}
	v, err := p.proc.Eval(obj, c.Path)
	if err != nil {
		return false, err
	}
	switch x := v.(type) {
	case string, int64, uint64, bool:
		return fmt.Sprint(x) == c.Equals, nil
	}
	return false, fmt.Errorf("%s.%s: a %T, not a str or int to compare with %q", c.Arg, c.Path, v, c.Equals)
}

// findEntered finds the frame of a call that entered at hit (boot ns). The
// watchpoint fires when the frame is made, a moment before the thread links
// it into its stack; a thread preempted in between (threads contending for
// the GIL on a busy machine) shows the caller on top for a while. A new
// thread may not be in the thread list yet, and a walk of a stack that
// changes under it can meet a frame being torn down. So the lookup is tried
// again, but only soon after the hit: later, the call has more likely
// returned, and waiting would delay every other event. Whether the call
// still ran when the reads ended is checked at its exit, as for every read.
//
// The waits are bounded to a twentieth of the time: an entry that is no call
// (f.__code__ read in a loop) never finds its frame, and must not make the
// reader fall behind on the calls.
func (p *pyRequests) findEntered(tid int, code, hit uint64) (*pyproc.Frame, error) {
	const retryFor, share = 2 * time.Millisecond, 20
	for wait := 25 * time.Microsecond; ; wait *= 2 {
		frame, err := p.proc.FindFrame(tid, code)
		now := time.Now()
		if now.Sub(p.waitSince) > time.Second {
			p.waitSince, p.waited = now, 0
		}
		if err == nil || time.Duration(spanbuilder.BootNow()-hit)+wait > retryFor || p.waited+wait > time.Second/share {
			return frame, err
		}
		p.Stats.Retries++
		p.waited += wait
		time.Sleep(wait)
	}
}

// idList reads a path ending in every request's id (reqs[*].rid): one
// evaluation shares the type lookups across items. A path ending in one id
// (self.path) names one request.
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
