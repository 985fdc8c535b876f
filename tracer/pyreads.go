package tracer

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanschema"
)

// pyCalls turns the events of Python stage calls into what the builder
// takes: which requests each call served, which calls a stage's when leaves
// out, and the accepted counts of accept stages, handed to the CountMatcher.
//
// What a call served is read at the trap of its return, in the BPF program
// (loader.PyCallRead on the exit event): the values are those the call's
// frame held then, read while the thread was stopped. A stage whose paths
// could not be compiled for the BPF reader is read from user space while
// the call runs (pyuser.go): then a read that had not ended when the call
// returned is discarded, never used.
type pyCalls struct {
	sites   func(site int) (*loader.PyTarget, bool)
	user    *userReads                // nil when every stage is read at the trap
	late    *spanbuilder.LateAccept   // nil without accepted counts
	match   counter                   // nil without an accept stage
	pending map[callKey][]pendingRead // user reads, a stack per site and thread
	pushed  pushedReads               // temporaries read at the push (nil until one is)
	// With the spec's same_batch (nil maps without): the requests a call
	// of each thread's current step read, where each thread is in its step
	// (to tell when a step begins), and when each site's latest call on
	// each thread began (to tell a call nested in another).
	stepReads map[uint32]stepRead
	stepPos   map[uint32]*stepPos
	entered   map[callKey]uint64
	// typeName names the type of a value read (for messages).
	typeName func(uint64) string
	Stats    PyStats
}

// PyStats counts what the Python side could and could not read.
type PyStats struct {
	// Calls whose requests were read (at the trap or from user space),
	// failed to be read, or read from user space too late to be trusted.
	Reads, Failed, Late uint64
	// Calls left out by a stage's when (or whose when could not be read).
	Skipped uint64
	// Calls whose own read failed that took the requests another call of
	// their step read (the spec's same_batch).
	FromStep uint64
	// Calls whose temporary arguments, freed by the pop, were read at the
	// push.
	FromPush uint64
	// Calls whose when could not be read, kept because a call nested in
	// them was kept by its own when and read their batch (same_batch).
	WhenFromStep uint64
	// User-space reads: frame lookups tried again, and the time from the
	// watchpoint hit to the end of the reads.
	Retries        uint64
	MaxLag, SumLag time.Duration
	// Accepted counts: verifies that got theirs, and that went without.
	Matched, Unmatched uint64
	AcceptedDrafts     int64 // over the matched verifies
	// Why verifies went without: calls whose counts had not come
	// GiveUpAfter after them, and times the matching started over (a
	// verify or a read of counts lost).
	GaveUp, Restarts uint64
	LastError        string
	// Code objects followed to their replacement (reload, reassignment).
	Replaced int
}

// stepRead is what a call of a thread's current step read, and when that
// call ended.
type stepRead struct {
	rids []string
	at   uint64
}

// trackSteps readies the same_batch state.
func (p *pyCalls) trackSteps() {
	p.stepReads, p.stepPos, p.entered = map[uint32]stepRead{}, map[uint32]*stepPos{}, map[callKey]uint64{}
}

type callKey struct {
	site int
	tid  uint32
}

// stepPos is where a thread is in its step, by the rules the span builder
// steps by (spanschema): Python stages are batch stages.
type stepPos struct {
	last, first string
	raised      bool // the latest call's exit had an error
	begun       bool // the latest entry began a step
}

// next is the position after e, a call of stage name.
func (s *stepPos) next(name string, e *spanbuilder.Event) *stepPos {
	if s == nil {
		s = &stepPos{}
	}
	if e.Exit {
		s.raised, s.begun = e.Err != "", false
		return s
	}
	s.begun = spanschema.NewStep(s.last, name) || spanschema.RepeatBegins(s.first, name, true, s.raised)
	if s.begun || s.first == "" {
		s.first = name
	}
	s.last = name
	return s
}

// forget drops what is kept for a thread that has exited (at boot ns at),
// so that the maps do not grow with every thread the target ever ran and a
// new thread given its ID starts fresh. Counts it read and held are handed
// on: no later event of the thread can prove them stale.
func (p *pyCalls) forget(tid uint32, at uint64) {
	if p.user != nil {
		p.user.release(p, tid, at)
	}
	if p.match != nil {
		p.match.Gone(tid, at)
	}
	delete(p.stepReads, tid)
	delete(p.stepPos, tid)
	if p.pushed != nil {
		p.pushed.forget(tid)
	}
	for k := range p.entered {
		if k.tid == tid {
			delete(p.entered, k)
		}
	}
	for k := range p.pending {
		if k.tid == tid {
			delete(p.pending, k)
		}
	}
}

// handle takes a Python stage's event before the builder does; false for
// events that make no span.
func (p *pyCalls) handle(e *spanbuilder.Event) bool {
	t, ok := p.sites(e.Site)
	if !ok {
		return true
	}
	if p.user != nil {
		p.user.release(p, e.TID, e.BootNs)
	}
	name := t.Stage.Name
	if p.stepReads != nil && !e.Cancel {
		p.stepPos[e.TID] = p.stepPos[e.TID].next(name, e)
		if p.stepPos[e.TID].begun {
			delete(p.stepReads, e.TID)
		}
	}
	span := name != probes.Accept
	if t.UserReads() {
		return p.user.handle(p, t, e, span)
	}
	read, _ := e.Read.(*loader.PyCallRead)
	key := callKey{e.Site, e.TID}
	if !e.Exit && p.entered != nil {
		p.entered[key] = e.BootNs
	}
	if t.Program != nil {
		read = p.temporaries(key, e, read)
	}
	if !e.Exit || e.Cancel || t.Program == nil {
		return span
	}
	if read == nil {
		read = &loader.PyCallRead{Err: fmt.Errorf("nothing was read at the trap")}
	}
	if name == probes.Accept {
		p.counts(t, e.TID, e.BootNs, read)
		return false
	}
	if keep, err := p.when(t, read); !keep && err != nil && p.nestedKept(e) {
		// Its argument was gone by the return (a temporary), but a call
		// within it passed its own when on the same batch: it is the stage.
		p.Stats.WhenFromStep++
	} else if !keep {
		// Left out: its entry already reached the builder, withdraw it.
		p.Stats.Skipped++
		if err != nil {
			p.fail(name+": when", err)
			p.unsure(name, e.TID, e.BootNs)
		}
		e.Cancel = true
		return true
	}
	rids, err := p.requests(t, read)
	switch {
	case err != nil:
		p.fail(name, err)
		e.Requests = []string{} // serves none: better than maybe the wrong ones
	case rids != nil:
		p.Stats.Reads++
		e.Requests = rids
	}
	p.served(t, e, rids != nil)
	if t.Stage.Accepted != nil && e.Err == "" {
		p.ownCounts(t, e, read)
	}
	return true
}

// temporaries pairs an exit's reads with what its entry read of its
// temporary arguments: the entry's are kept (and taken off the event), the
// exit's completed with them.
func (p *pyCalls) temporaries(key callKey, e *spanbuilder.Event, read *loader.PyCallRead) *loader.PyCallRead {
	if !e.Exit {
		if read != nil && p.pushed == nil {
			p.pushed = pushedReads{}
		}
		if p.pushed != nil {
			p.pushed.entry(key, read)
		}
		e.Read = nil
		return nil
	}
	if p.pushed == nil {
		return read
	}
	read, n := withPushed(read, p.pushed.exit(key))
	if n > 0 {
		p.Stats.FromPush++
	}
	return read
}

// ownCounts puts a verify's own counts (the list it returned, say) on it.
func (p *pyCalls) ownCounts(t *loader.PyTarget, e *spanbuilder.Event, read *loader.PyCallRead) {
	key := spanbuilder.VerifyKey{TID: e.TID, End: e.BootNs}
	p.late.Expect(key, len(e.Requests))
	defer p.late.Close(key)
	rids, counts, err := p.acceptCounts(t, read)
	if err != nil {
		p.fail(t.Stage.Name+": accepted", err)
		return
	}
	for i, rid := range rids {
		p.late.Count(key, rid, counts[i])
	}
}

// served completes a call's requests with its step's (same_batch) and
// tells the count matching about verifies.
func (p *pyCalls) served(t *loader.PyTarget, e *spanbuilder.Event, good bool) {
	if r, ok := p.stepReads[e.TID]; ok && !good && t.Stage.Requests != nil {
		// Another call of this step read its batch (same_batch): this call
		// served the same requests.
		e.Requests, good = r.rids, true
		p.Stats.FromStep++
	} else if good && p.stepReads != nil {
		p.stepReads[e.TID] = stepRead{e.Requests, e.BootNs}
	}
	if p.match != nil && t.Stage.Name == probes.Verify && e.Err == "" && t.Stage.Accepted == nil {
		// A verify that raised is not the step's: the retry that follows is.
		var rids []string
		if good {
			rids = e.Requests
		}
		p.match.Verify(spanbuilder.VerifyKey{TID: e.TID, End: e.BootNs}, rids)
	}
}

// nestedKept tells whether, with same_batch, a call that began after e's
// call and ended before it (so nested in it, on its batch) read the
// requests its step keeps. A call kept before e's began may be another
// step's, and is not taken.
func (p *pyCalls) nestedKept(e *spanbuilder.Event) bool {
	r, ok := p.stepReads[e.TID]
	began, entered := p.entered[callKey{e.Site, e.TID}]
	return ok && entered && r.at > began
}

// unsure: a call left out because its when could not be read may have been
// a verify whose counts come later; the count matching starts over.
func (p *pyCalls) unsure(stage string, tid uint32, at uint64) {
	if p.match != nil && stage == probes.Verify {
		p.match.LostOn(tid, at)
	}
}

func (p *pyCalls) fail(what string, err error) {
	p.Stats.Failed++
	p.Stats.LastError = fmt.Sprintf("%s: %v", what, err)
}

// field returns the values read for role, or why they could not be.
func field(t *loader.PyTarget, read *loader.PyCallRead, role loader.PyRole) (loader.PyValues, string, error) {
	for i, f := range t.Program.Fields {
		if f.Role != role {
			continue
		}
		if read.Err != nil {
			return loader.PyValues{}, f.Path, read.Err
		}
		if i >= len(read.Fields) {
			return loader.PyValues{}, f.Path, fmt.Errorf("not read")
		}
		v := read.Fields[i]
		if v.Err != nil {
			return v, f.Path, fmt.Errorf("at %s: %w", f.Where(v.Err), v.Err)
		}
		return v, f.Path, nil
	}
	return loader.PyValues{}, "", errNoField
}

var errNoField = fmt.Errorf("no such field")

// when tells whether the call is one the stage's when keeps; one whose
// value could not be read is left out (it might be one to leave out).
func (p *pyCalls) when(t *loader.PyTarget, read *loader.PyCallRead) (bool, error) {
	c := t.Stage.When
	if c == nil {
		return true, nil
	}
	v, path, err := field(t, read, loader.RoleWhen)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if len(v.Values) != 1 || v.List {
		return false, fmt.Errorf("%s: a list, not one value to compare", path)
	}
	return p.oneOf(v.Values[0], c.Equals)
}

// oneOf tells whether a value read equals one of a spec's constants as
// written: an int's digits, a str's text, True/False.
func (p *pyCalls) oneOf(v any, want []string) (bool, error) {
	var text []string
	switch x := v.(type) {
	case bool:
		s := "False"
		if x {
			s = "True"
		}
		text = []string{s, fmt.Sprint(x)}
	case int64, uint64, string:
		text = []string{fmt.Sprint(x)}
	default:
		return false, fmt.Errorf("a %s, not a str, int or bool to compare with %s", p.describe(v), strings.Join(want, " or "))
	}
	for _, w := range want {
		if slices.Contains(text, w) {
			return true, nil
		}
	}
	return false, nil
}

// requests returns the request ids a call served, nil when its stage names
// none.
func (p *pyCalls) requests(t *loader.PyTarget, read *loader.PyCallRead) ([]string, error) {
	v, path, err := field(t, read, loader.RoleRequests)
	if err == errNoField {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ids, err := p.idStrings(v.Values)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ids, nil
}

// idStrings turns the ids read (str or int) into strings.
func (p *pyCalls) idStrings(vals []any) ([]string, error) {
	out := make([]string, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case string:
			out[i] = x
		case int64:
			out[i] = fmt.Sprint(x)
		default:
			return nil, fmt.Errorf("item %d: a %s, not a str or int id", i, p.describe(v))
		}
	}
	return out, nil
}

func (p *pyCalls) describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case loader.PyObject:
		if p.typeName != nil {
			return p.typeName(x.Type)
		}
		return fmt.Sprintf("object (type at %#x)", x.Type)
	}
	return fmt.Sprintf("%T", v)
}

// counts hands an accept stage's read to the count matching: each
// request's count, or NoDrafts for one that had none (not in drafted).
func (p *pyCalls) counts(t *loader.PyTarget, tid uint32, at uint64, read *loader.PyCallRead) {
	if p.match != nil {
		rids, counts, err := p.acceptCounts(t, read)
		p.applyCounts(tid, at, rids, counts, err)
	}
}

// applyCounts hands counts read as an accept returned (at boot ns at) to
// the matching; a failed read keeps its place.
func (p *pyCalls) applyCounts(tid uint32, at uint64, rids []string, counts []int64, err error) {
	if p.match == nil {
		return
	}
	if err != nil {
		p.fail("accept", err)
		p.match.Unreadable(tid, at)
		return
	}
	p.match.Counts(tid, at, rids, counts)
}

// acceptCounts reads the requests, their counts (PyList.Count) and the
// requests that had drafts from an accept stage's fields.
func (p *pyCalls) acceptCounts(t *loader.PyTarget, read *loader.PyCallRead) ([]string, []int64, error) {
	v, path, err := field(t, read, loader.RoleRequests)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	rids, err := p.idStrings(v.Values)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	a, path, err := field(t, read, loader.RoleAccepted)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var sub int64
	if t.Stage.Accepted.Sub != nil {
		b, path, err := field(t, read, loader.RoleSub)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		var ok bool
		if len(b.Values) == 1 && !b.List {
			sub, ok = b.Values[0].(int64)
		}
		if !ok {
			return nil, nil, fmt.Errorf("%s: not one int to take from each count", path)
		}
	}
	counts := make([]int64, len(a.Values))
	for i, c := range a.Values {
		n, ok := c.(int64)
		if !ok {
			return nil, nil, fmt.Errorf("%s: item %d: a %s, not an int", path, i, p.describe(c))
		}
		counts[i] = t.Stage.Accepted.Count(n, sub)
	}
	var drafted []string
	if t.Stage.Drafted != nil {
		d, path, err := field(t, read, loader.RoleDrafted)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		if drafted, err = p.idStrings(d.Values); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return assembleCounts(rids, counts, t.Stage.Drafted != nil, drafted)
}

// assembleCounts is the one rule for an accept stage's reads, at the trap
// or from user space: counts[i] is rids[i]'s accepted count, and where the
// stage reads which requests had drafts (drafted), a request not among
// them had none: NoDrafts, whatever its count says.
func assembleCounts(rids []string, counts []int64, readsDrafted bool, drafted []string) ([]string, []int64, error) {
	if len(counts) != len(rids) {
		return nil, nil, fmt.Errorf("%d requests but %d accepted counts", len(rids), len(counts))
	}
	if readsDrafted {
		for i, rid := range rids {
			if !slices.Contains(drafted, rid) {
				counts[i] = spanbuilder.NoDrafts
			}
		}
	}
	return rids, counts, nil
}
