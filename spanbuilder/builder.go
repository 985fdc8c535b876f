// Package spanbuilder turns stage boundaries (entry and exit of probed
// functions, per thread) into per-request decode steps. It is pure Go: events
// come from the loader or from a test, finished steps go to a Sink.
package spanbuilder

import (
	"slices"
	"time"

	"github.com/specprobe/specprobe/spanschema"
)

// Site describes one probed function, as the loader armed it.
type Site struct {
	Stage string
	Batch bool // serves every request named in the same step
	// Native: a call of native code, which is never recursive and never
	// runs inside a later stage's call (Python's SGLang NGRAM drafts inside
	// its verify): an entry that would do either proves the open call over,
	// its exit lost (cut.go).
	Native bool
	// Boundary, for the spec's request boundary (stream.go), is the name
	// its requests' ids start with; its calls make no span. "" for a stage.
	Boundary string
}

// Value is one named integer read at a stage boundary.
type Value struct {
	Name string
	V    int64
}

// CallRead is what a probe read at a call beyond an Event's Values: a
// Python call's fields (loader.PyCallRead). The builder never looks
// inside; the layer between the loader and the builder turns it into
// Requests and counts before the event reaches the builder.
type CallRead interface{ CallRead() }

// Event is one boundary of one call.
type Event struct {
	BootNs    uint64
	PID, TID  uint32
	Site      int
	Exit      bool
	RequestID string // empty when the boundary reads none
	Values    [4]Value
	NValues   int
	// Requests a batch call named itself (a Python stage's request list, read
	// while the call ran), in batch order.
	Requests []string
	// Err, on an exit, says the call failed (a Python stage that raised).
	Err string
	// Cancel withdraws the thread's latest open call of the site: what
	// looked like its entry was not a call (a Python code object
	// referenced from the eval loop, then released).
	Cancel bool
	// Tentative, on an entry, says it is a call only once an exit closes
	// it (a Python +1 that may be a reference rather than a push: from the
	// eval loop, or from code without a name): proved over without one,
	// it is withdrawn, not cut.
	Tentative bool
	// Read is what the probe read beyond Values, for the layer between the
	// loader and the builder (a Python call's fields, read at its exit);
	// nil for none.
	Read CallRead
	// Depth, on an exit, is how many calls of the site the thread still
	// runs counting the one ending (a Python pop: its code's frames on the
	// stack); 0 when unknown. Open calls of the site beyond it lost their exit.
	Depth int
	// Dropped is how many events of this thread the kernel lost (ring
	// buffer full) just before this one: the thread's open calls are cut.
	Dropped uint32
	// CUDA is the thread's CUDA driver counters at this boundary.
	CUDA CUDACount
}

// Call is one finished (or abandoned) stage call.
type Call struct {
	Stage      string
	PID, TID   uint32
	Start, End time.Time
	EndBoot    uint64 // End as the probe read it (boot ns): names the call (VerifyKey)
	RequestID  string
	Values     []Value
	Err        string
	// Cut says why a call was closed without its exit (CutExitMissed,
	// CutDropped); "" for a call whose exit was seen.
	Cut string
	// CUDA is what the thread did in the CUDA driver during the call.
	CUDA     CUDAUse
	batch    bool
	requests []string
	cudaFrom CUDACount // the thread's counters at the call's entry
}

// Step is what one request went through in one decode step of one thread.
type Step struct {
	RequestID  string
	PID, TID   uint32
	Start, End time.Time
	Calls      []Call // draft, verify, draft_extend, in time order; accept values are on the verify
	// CUDA is what the thread did in the CUDA driver during its step outside
	// every stage (outsideStages).
	CUDA CUDAUse
}

// Sink receives finished steps, in order per thread.
type Sink interface {
	Step(Step)
}

// Builder pairs entries with exits per thread and groups calls into steps.
type Builder struct {
	sites   []Site
	clock   Clock
	sink    Sink
	threads map[uint32]*thread
	Stats   Stats
	rids    []string // flushStep's, reused
	// Values and calls are carved out of chunks: one allocation for many.
	// A chunk is never written twice (what a sink keeps stays as it was);
	// the collector frees it once no step holds a part of it.
	values []Value
	calls  []Call
	// Streams: the spec's stages name no request, so a step whose calls
	// name none serves its thread's request (stream.go) instead of none;
	// a thread's stream outside the request boundary's calls begins its
	// next request after StreamIdle without a step (0: never).
	Streams    bool
	StreamIdle time.Duration
}

const chunk = 256

// keepValues copies vs and then more into the current chunk.
func (b *Builder) keepValues(vs, more []Value) []Value {
	n := len(vs) + len(more)
	if n == 0 {
		return nil
	}
	if cap(b.values)-len(b.values) < n {
		b.values = make([]Value, 0, max(chunk, n))
	}
	at := len(b.values)
	b.values = append(append(b.values, vs...), more...)
	return b.values[at:len(b.values):len(b.values)]
}

// newCalls is an empty slice with room for n calls.
func (b *Builder) newCalls(n int) []Call {
	if cap(b.calls)-len(b.calls) < n {
		b.calls = make([]Call, 0, max(chunk, n))
	}
	at := len(b.calls)
	b.calls = b.calls[:at+n]
	return b.calls[at : at : at+n]
}

type openCall struct {
	site      int
	start     uint64
	requestID string
	values    []Value
	requests  []string
	cuda      CUDACount
	inner     bool // part of the call it runs in, not a stage call (innerCall)
	tentative bool // Event.Tentative
}

type thread struct {
	pid  uint32
	open []openCall
	step []Call
	last string // stage of the step's latest top-level call, "" at a step's start
	// When the open top-level call began: the stage before it ("" at a
	// step's start) and how many calls the step had.
	prev     string
	topStart int
	first    string // stage of the step's first top-level call
	raised   bool   // the latest top-level call ended with an error
	stream   streamThread
}

// New returns a Builder for the given sites; clock converts boot time to wall time.
func New(sites []Site, clock Clock, sink Sink) *Builder {
	return &Builder{sites: sites, clock: clock, sink: sink, threads: map[uint32]*thread{}}
}

// Add takes one event. Events of one thread must come in the order they happened.
func (b *Builder) Add(e *Event) {
	b.Stats.Events++
	t := b.threads[e.TID]
	if t == nil {
		t = &thread{pid: e.PID}
		b.threads[e.TID] = t
	}
	if e.Dropped > 0 {
		b.dropped(e.TID, t, e.BootNs, e.Dropped)
	}
	if b.sites[e.Site].Boundary != "" {
		b.boundary(e.TID, t, e)
		return
	}
	if e.Cancel {
		for i := len(t.open) - 1; i >= 0; i-- {
			if t.open[i].site == e.Site {
				t.open = slices.Delete(t.open, i, i+1)
				b.Stats.Withdrawn++
				break
			}
		}
		return
	}
	if !e.Exit {
		// Steps are told apart by the order in which top-level calls begin; a
		// stage called from inside another belongs to the outer call's step.
		site := b.sites[e.Site]
		stage := site.Stage
		if site.Native {
			b.cutNative(e.TID, t, e.Site, e.BootNs)
		}
		switch {
		case b.innerCall(t, stage):
			t.open = append(t.open, openCall{site: e.Site, start: e.BootNs, inner: true})
			return
		case len(t.open) == 0:
			if spanschema.NewStep(t.last, stage) || spanschema.RepeatBegins(t.first, stage, site.Batch, t.raised) {
				b.flushStep(e.TID, t)
			}
			if t.last == "" {
				t.first = stage
			}
			t.prev, t.last, t.topStart = t.last, stage, len(t.step)
		case spanschema.NewStep(t.prev, stage):
			// A call of an earlier stage inside the top-level one (SGLang's
			// NGRAM drafts inside its verify): the top-level call began the
			// next step.
			b.splitStep(e.TID, t)
		}
		t.open = append(t.open, openCall{site: e.Site, start: e.BootNs, requestID: e.RequestID, values: b.keepValues(e.Values[:e.NValues], nil), requests: e.Requests, cuda: e.CUDA, tentative: e.Tentative})
		return
	}
	if e.Depth > 0 {
		b.cutDeeper(e.TID, t, e.Site, e.Depth, e.BootNs)
	}
	// Find the matching entry; calls above it lost their exit (a dropped event
	// or a longjmp) and are closed with an error rather than left to leak.
	i := len(t.open) - 1
	for i >= 0 && t.open[i].site != e.Site {
		i--
	}
	if i < 0 {
		b.Stats.UnmatchedExits++
		return
	}
	for j := len(t.open) - 1; j > i; j-- {
		b.cut(e.TID, t, t.open[j], e.BootNs, CutExitMissed, "stage exit was not seen")
	}
	oc := t.open[i]
	t.open = t.open[:i]
	if e.RequestID != "" {
		oc.requestID = e.RequestID
	}
	if e.NValues > 0 {
		oc.values = b.keepValues(oc.values, e.Values[:e.NValues])
	}
	if e.Requests != nil {
		oc.requests = e.Requests
	}
	b.finish(e.TID, t, oc, e.BootNs, e.CUDA, e.Err)
	if len(t.open) == 0 {
		t.raised = e.Err != ""
	}
}

func (b *Builder) finish(tid uint32, t *thread, oc openCall, end uint64, cuda CUDACount, errMsg string) {
	b.close(tid, t, oc, end, cuda, "", errMsg)
}

// cut closes oc without its exit: why says what proved it over. What the
// call did in the CUDA driver is not known without its exit's counters.
func (b *Builder) cut(tid uint32, t *thread, oc openCall, end uint64, why, errMsg string) {
	b.close(tid, t, oc, end, CUDACount{}, why, errMsg)
}

func (b *Builder) close(tid uint32, t *thread, oc openCall, end uint64, cuda CUDACount, why, errMsg string) {
	if oc.inner {
		return
	}
	site := b.sites[oc.site]
	c := Call{
		Stage: site.Stage, PID: t.pid, TID: tid,
		Start: b.clock.Wall(oc.start), End: b.clock.Wall(max(end, oc.start)), EndBoot: end,
		RequestID: oc.requestID, Values: oc.values, Err: errMsg, Cut: why, batch: site.Batch, requests: oc.requests,
		CUDA: cuda.Since(oc.cuda), cudaFrom: oc.cuda,
	}
	b.Stats.observe(&c)
	t.step = append(t.step, c)
}

// splitStep hands on the calls of the step made before the open top-level
// call began; that call and what it has finished so far start the next step.
func (b *Builder) splitStep(tid uint32, t *thread) {
	rest := slices.Clone(t.step[t.topStart:])
	last := t.last
	t.step = t.step[:t.topStart]
	b.flushStep(tid, t)
	t.step = append(t.step, rest...)
	t.last, t.prev, t.topStart, t.first = last, "", 0, last
}

// flushStep hands the thread's current step to the sink, once per request it served.
func (b *Builder) flushStep(tid uint32, t *thread) {
	calls := t.step
	t.step = t.step[:0] // the sink gets copies (stepFor), so the array can be reused
	t.last = ""
	if len(calls) == 0 {
		return
	}
	rids := b.rids[:0]
	defer func() { clear(rids); b.rids = rids[:0] }()
	for _, c := range calls {
		if !c.batch && c.RequestID != "" && !slices.Contains(rids, c.RequestID) {
			rids = append(rids, c.RequestID)
		}
		for _, r := range c.requests {
			if !slices.Contains(rids, r) {
				rids = append(rids, r)
			}
		}
	}
	if len(rids) == 0 && b.Streams {
		rids = append(rids, b.streamRequest(tid, t, calls))
	}
	b.Stats.Steps++
	sent := false
	outside := outsideStages(calls)
	b.Stats.addCUDA(OutsideStages, outside)
	for _, rid := range rids {
		if st := b.stepFor(rid, t.pid, tid, calls); len(st.Calls) > 0 {
			st.CUDA = outside
			b.sink.Step(st)
			sent = true
		}
	}
	if !sent {
		b.Stats.UnattributedSteps++
		b.Stats.UnattributedCalls += uint64(len(calls))
	}
}

// stepFor selects the calls that served rid, and moves each accept's values
// onto the verify that began last before it (the verify may contain it).
func (b *Builder) stepFor(rid string, pid, tid uint32, calls []Call) Step {
	n := 0
	for i := range calls {
		if serves(&calls[i], rid) && calls[i].Stage != spanschema.Accept {
			n++
		}
	}
	s := Step{RequestID: rid, PID: pid, TID: tid, Calls: b.newCalls(n)}
	for i := range calls {
		if c := &calls[i]; serves(c, rid) && c.Stage != spanschema.Accept {
			s.Calls = append(s.Calls, *c)
			s.Calls[len(s.Calls)-1].RequestID = rid
		}
	}
	slices.SortStableFunc(s.Calls, func(a, b Call) int { return a.Start.Compare(b.Start) })
	for i := range calls {
		a := &calls[i]
		if a.Stage != spanschema.Accept || !serves(a, rid) {
			continue
		}
		v := -1
		for i, c := range s.Calls {
			if c.Stage == spanschema.Verify && !c.Start.After(a.Start) {
				v = i
			}
		}
		if v < 0 {
			continue
		}
		c := &s.Calls[v]
		c.Values = b.keepValues(c.Values, a.Values)
		if c.Err == "" {
			c.Err = a.Err
		}
	}
	if len(s.Calls) > 0 {
		s.Start, s.End = s.Calls[0].Start, s.Calls[0].End
		for _, c := range s.Calls[1:] {
			s.Start = minTime(s.Start, c.Start)
			s.End = maxTime(s.End, c.End)
		}
	}
	return s
}

// serves tells whether call c served request rid. A batch call that named
// its own requests serves those only (a vLLM step's draft is for the next
// batch, which requests join and leave), one whose requests could not be
// read (empty) serves none, and one of a stage that names none (nil) serves
// the step's.
func serves(c *Call, rid string) bool {
	if !c.batch {
		return c.RequestID == rid
	}
	return c.requests == nil || slices.Contains(c.requests, rid)
}

// ThreadGone closes what a thread left open (it died mid-stage) and flushes its step.
func (b *Builder) ThreadGone(tid uint32, at uint64, why string) {
	t := b.threads[tid]
	if t == nil {
		return
	}
	for j := len(t.open) - 1; j >= 0; j-- {
		b.finish(tid, t, t.open[j], at, CUDACount{}, why)
	}
	t.open = nil
	b.flushStep(tid, t)
	delete(b.threads, tid)
}

// Flush ends everything: open calls get an error status saying why.
func (b *Builder) Flush(at uint64, why string) {
	for _, tid := range b.sortedThreads() {
		b.ThreadGone(tid, at, why)
	}
}

// OpenThreads lists the threads of process pid with a call in progress, for
// liveness checks.
func (b *Builder) OpenThreads(pid uint32) []uint32 { return b.threadsOf(pid, true) }

// Threads lists every thread of process pid the builder holds state for,
// open call or not: the tracer checks them for exit now and then, so that a
// dead thread's step ends and its ID, which the kernel gives to new threads,
// starts fresh.
func (b *Builder) Threads(pid uint32) []uint32 { return b.threadsOf(pid, false) }

func (b *Builder) threadsOf(pid uint32, open bool) []uint32 {
	var out []uint32
	for tid, t := range b.threads {
		if t.pid == pid && (!open || len(t.open) > 0) {
			out = append(out, tid)
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
