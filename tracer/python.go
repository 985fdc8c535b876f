package tracer

import (
	"fmt"
	"io"
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
	proc     *pyproc.Process
	sess     *loader.Session
	late     *spanbuilder.LateAccept // nil without an accept stage
	pending  map[callKey]pendingRead
	seen     map[string]bool     // requests named by some step already
	stepRids map[uint32][]string // what this step's draft named, per thread
	doubt    map[uint32]bool     // the next step's new requests may predate tracing
	Stats    PyStats
}

// PyStats counts what the Python side could and could not read.
type PyStats struct {
	Reads, Late, Failed uint64
	// From the watchpoint hit to the end of the reads.
	MaxLag, SumLag time.Duration
	// Accepted counts: verifies that got theirs, and that went without
	// (request already decoding when tracing began, or a step that could
	// not be attributed).
	Matched, Unmatched uint64
	AcceptedDrafts     int64 // over the matched verifies
	LastError          string
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
}

func newPyRequests(proc *pyproc.Process, sess *loader.Session, late *spanbuilder.LateAccept) *pyRequests {
	return &pyRequests{proc: proc, sess: sess, late: late, pending: map[callKey]pendingRead{},
		seen: map[string]bool{}, stepRids: map[uint32][]string{}, doubt: map[uint32]bool{}}
}

// handle reads at a Python stage call's entry (an accept stage's at its
// exit) and hands the requests to the builder with the exit; it returns
// false for events that make no span.
func (p *pyRequests) handle(e *spanbuilder.Event) bool {
	t, ok := p.sess.PySite(e.Site)
	if !ok {
		return true
	}
	name := t.Stage.Name
	span := name != probes.Accept
	if t.Stage.Requests == nil {
		return span
	}
	if name == probes.Accept {
		if e.Exit {
			p.accepted(t, int(e.TID))
		}
		return false
	}
	key := callKey{e.Site, e.TID}
	if !e.Exit {
		rids, err := p.read(t, int(e.TID))
		end := spanbuilder.BootNow()
		p.Stats.MaxLag = max(p.Stats.MaxLag, time.Duration(end-e.BootNs))
		p.Stats.SumLag += time.Duration(end - e.BootNs)
		p.pending[key] = pendingRead{rids: rids, end: end, err: err}
		return span
	}
	r, ok := p.pending[key]
	delete(p.pending, key)
	good := false
	switch {
	case !ok:
	case r.err != nil:
		p.Stats.Failed++
		p.Stats.LastError = fmt.Sprintf("%s: %v", name, r.err)
	case e.BootNs < r.end:
		// The call had returned before the reads ended: they may have seen
		// the next batch. Better no requests than wrong ones.
		p.Stats.Late++
		e.Requests = []string{}
	default:
		p.Stats.Reads++
		e.Requests = r.rids
		good = true
	}
	if e.Err == "" {
		// A call that raised is not the step's: the retry that follows is.
		p.track(name, e.TID, good, r.rids)
	}
	return span
}

// track keeps the first-in-first-out matching of late counts honest.
func (p *pyRequests) track(stage string, tid uint32, good bool, rids []string) {
	if p.late == nil {
		return
	}
	switch stage {
	case probes.Draft:
		p.stepRids[tid] = nil
		if good {
			p.stepRids[tid] = rids
		}
	case probes.Verify:
		if !good {
			rids = p.stepRids[tid]
		}
		p.stepRids[tid] = nil
		if rids == nil {
			// A step without requests: its verify's count cannot be placed.
			p.late.ForgetAll()
			p.doubt[tid] = true
			return
		}
		if len(p.seen) > 1<<20 { // bounded memory: start over, doubting
			p.seen = map[string]bool{}
			p.doubt[tid] = true
		}
		first, known := p.doubt[tid]
		for _, rid := range rids {
			if !p.seen[rid] {
				p.seen[rid] = true
				if known && !first {
					p.late.Follow(rid)
				}
			}
		}
		p.doubt[tid] = false
	}
}

// accepted reads, as an accept stage returns, the accepted counts from the
// frame of its caller, which is still running.
func (p *pyRequests) accepted(t *loader.PyTarget, tid int) {
	if p.late == nil || t.ReadFrom == nil {
		return
	}
	frame, err := p.proc.FindFrame(tid, t.ReadFrom.Addr)
	var rids []string
	var counts []int64
	if err == nil {
		rids, err = p.evalIDs(frame, t.Stage.Requests.Arg, t.Stage.Requests.IDPath())
	}
	if err == nil {
		counts, err = p.evalInts(frame, t.Stage.Accepted.Arg, t.Stage.Accepted.Path)
	}
	if err == nil && len(counts) != len(rids) {
		err = fmt.Errorf("%d requests but %d accepted counts", len(rids), len(counts))
	}
	if err == nil {
		// Still the same call? Its frame must still run the caller.
		_, err = p.proc.FindFrame(tid, t.ReadFrom.Addr)
	}
	if err != nil {
		p.Stats.Failed++
		p.Stats.LastError = fmt.Sprintf("accept: %v", err)
		p.late.ForgetAll() // a lost count would shift every later one
		for tid := range p.doubt {
			p.doubt[tid] = true
		}
		return
	}
	now := time.Now()
	for i, rid := range rids {
		p.late.Accepted(rid, counts[i], now)
	}
}

func (p *pyRequests) evalIDs(frame *pyproc.Frame, arg, path string) ([]string, error) {
	obj, err := p.proc.Local(frame, arg)
	if err != nil {
		return nil, err
	}
	return idList(p.proc, obj, path)
}

func (p *pyRequests) evalInts(frame *pyproc.Frame, arg, path string) ([]int64, error) {
	obj, err := p.proc.Local(frame, arg)
	if err != nil {
		return nil, err
	}
	v, err := p.proc.Eval(obj, path)
	if err != nil {
		return nil, err
	}
	items, ok := v.([]pyproc.Value)
	if !ok {
		return nil, fmt.Errorf("%s: expected a list, got %T", path, v)
	}
	out := make([]int64, len(items))
	for i, it := range items {
		n, ok := it.(int64)
		if !ok {
			return nil, fmt.Errorf("%s: item %d: expected an int, got %T", path, i, it)
		}
		out[i] = n
	}
	return out, nil
}

func (p *pyRequests) read(t *loader.PyTarget, tid int) ([]string, error) {
	spec := t.Stage.Requests
	frame, err := p.proc.FindFrame(tid, t.Code.Addr)
	if err != nil {
		return nil, err
	}
	return p.evalIDs(frame, spec.Arg, spec.IDPath())
}

// idList reads a path ending in every request's id (reqs[*].rid): one
// evaluation shares the type lookups across items.
func idList(proc *pyproc.Process, obj uint64, path string) ([]string, error) {
	v, err := proc.Eval(obj, path)
	if err != nil {
		return nil, err
	}
	items, ok := v.([]pyproc.Value)
	if !ok {
		return nil, fmt.Errorf("%s: expected a list, got %T", path, v)
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

// pySession is the Python side of a session; nil when the spec has no Python
// stage, and then every method does nothing.
type pySession struct {
	proc    *pyproc.Process
	targets []loader.PyTarget
	reqs    *pyRequests
	late    *spanbuilder.LateAccept
	sess    *loader.Session
	// Threads whose exception slot watch_hit knows; others are looked up
	// when they first enter a stage.
	slots map[uint32]bool
}

func preparePython(cfg Config) (*pySession, error) {
	hasPython := false
	for _, st := range cfg.Spec.Stages {
		hasPython = hasPython || st.IsPython()
	}
	if !hasPython {
		return nil, nil
	}
	proc, err := pyproc.Attach(cfg.PID)
	if err != nil {
		return nil, fmt.Errorf("PID %d: %w", cfg.PID, err)
	}
	wait := cfg.ImportWait
	if wait == 0 {
		wait = 30 * time.Second
	}
	targets, err := loader.ResolvePython(proc, cfg.Spec, wait)
	if err != nil {
		proc.Close()
		return nil, err
	}
	return &pySession{proc: proc, targets: targets}, nil
}

func (p *pySession) arm(sess *loader.Session) error {
	if p == nil {
		return nil
	}
	if err := sess.ArmPython(p.targets, p.proc.Version()); err != nil {
		return err
	}
	p.sess, p.slots = sess, map[uint32]bool{}
	p.watchExceptions()
	return nil
}

// watchExceptions gives watch_hit each thread's exception slot, so an exit
// tells a stage that raised from one that returned.
func (p *pySession) watchExceptions() {
	threads, _ := p.proc.Threads()
	for _, t := range threads {
		if t.TID <= 0 || p.slots[uint32(t.TID)] {
			continue
		}
		p.slots[uint32(t.TID)] = true
		if slot := p.proc.ExceptionSlot(t); slot != 0 {
			_ = p.sess.SetExceptionSlot(uint32(t.TID), slot)
		}
	}
}

// sink puts the late-acceptance matching in front of next when the spec has
// a Python accept stage.
func (p *pySession) sink(next spanbuilder.Sink, sess *loader.Session) spanbuilder.Sink {
	if p == nil {
		return next
	}
	out := next
	for _, t := range p.targets {
		if t.Stage.Name == probes.Accept {
			p.late = spanbuilder.NewLateAccept(next)
			out = p.late
		}
	}
	p.reqs = newPyRequests(p.proc, sess, p.late)
	return out
}

func (p *pySession) expire(now time.Time) {
	if p != nil && p.late != nil {
		p.late.Expire(now)
	}
}

func (p *pySession) flush() {
	if p != nil && p.late != nil {
		p.late.Close()
	}
}

func (p *pySession) describe(w io.Writer) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "  python %s\n", p.proc.Version())
	for _, t := range p.targets {
		fmt.Fprintf(w, "  %-12s %s.%s (%s:%d) code object %#x, watched on every thread\n",
			t.Stage.Name, t.Stage.Module, t.Stage.Qualname, t.Code.Filename, t.Code.FirstLine, t.Code.Addr)
	}
}

// filter wraps the builder's Add with the reads of Python stage calls.
func (p *pySession) filter(add func(*spanbuilder.Event)) func(*spanbuilder.Event) {
	if p == nil {
		return add
	}
	return func(e *spanbuilder.Event) {
		if !e.Exit && !p.slots[e.TID] {
			p.watchExceptions() // a thread started after attach
			p.slots[e.TID] = true
		}
		if e.Exit && e.Err != "" {
			for _, v := range e.Values[:e.NValues] {
				if v.Name == "exception" {
					e.Err = "raised " + p.proc.ExceptionName(uint64(v.V))
				}
			}
		}
		if p.reqs.handle(e) {
			add(e)
		}
	}
}

func (p *pySession) stats() *PyStats {
	if p == nil {
		return nil
	}
	st := p.reqs.Stats
	if p.late != nil {
		st.Matched, st.Unmatched, st.AcceptedDrafts = p.late.Matched, p.late.Unmatched, p.late.Drafts
	}
	return &st
}

func (p *pySession) close() {
	if p != nil {
		p.proc.Close()
	}
}
