package spanbuilder

import (
	"fmt"
	"slices"
	"time"

	"github.com/specprobe/specprobe/spanschema"
)

// Requests of engines whose stages name none (transformers' assisted
// generation, llama.cpp's speculative example, one-stream scripts): with
// Builder.Streams set, a step whose calls name no request serves the
// request its thread is in:
//   - inside a call of the spec's request boundary (Site.Boundary, e.g.
//     transformers' generate()), one request per such call: its outermost
//     call on the thread made outside any stage call opens it, its return
//     ends it (a call of it nested in a stage, as transformers' draft runs
//     the assistant's generate(), is part of the request);
//   - outside one, the thread's stream: its steps are one request until a
//     boundary call begins, or until it took part in no step for
//     StreamIdle, after which its next step begins the next request.
// A request's id says where it came from: "<boundary>-<tid>-<n>" or
// "thread-<tid>-<n>", n counting the thread's requests from 1. Ids are
// given when a request's first step is handed on, so a boundary entry
// withdrawn (Event.Cancel) costs no number.

// boundCall is an open call of the request boundary on a thread.
type boundCall struct {
	site   int
	opened bool // it opened the thread's current request
}

// streamThread is a thread's request state, for specs that name none.
type streamThread struct {
	bounds []boundCall
	// boundary names the open boundary call that opened the current
	// request; "" outside one (the thread's stream).
	boundary string
	rid      string // the current request's id; "" until its first step
	lastEnd  time.Time
	n        int // requests begun on the thread
}

// boundary takes an event of the request boundary's site.
func (b *Builder) boundary(tid uint32, t *thread, e *Event) {
	s := &t.stream
	oldest := func() int {
		return slices.IndexFunc(s.bounds, func(c boundCall) bool { return c.site == e.Site })
	}
	switch {
	case e.Cancel:
		if i := lastIndex(s.bounds, e.Site); i >= 0 {
			if s.bounds[i].opened && s.rid == "" {
				s.boundary = ""
			}
			s.bounds = slices.Delete(s.bounds, i, i+1)
			b.Stats.Withdrawn++
		}
	case !e.Exit:
		opens := len(t.open) == 0 && s.boundary == ""
		if opens {
			// What the thread did before belongs to the request before.
			b.endStep(tid, t)
			s.boundary, s.rid = b.sites[e.Site].Boundary, ""
		}
		s.bounds = append(s.bounds, boundCall{site: e.Site, opened: opens})
	default:
		if e.Depth > 0 {
			// A Python pop: the site's calls beyond its frames on the
			// stack lost their exit, the oldest taken (as cutDeeper).
			for n := countSite(s.bounds, e.Site); n > e.Depth; n-- {
				i := oldest()
				b.closeBounds(tid, t, i, i+1, e.BootNs)
			}
		}
		i := lastIndex(s.bounds, e.Site)
		if i < 0 {
			b.Stats.UnmatchedExits++
			if s.boundary == "" && len(t.open) == 0 {
				// A call begun before attach: the stream's steps so far
				// were its request, and it is over.
				b.endStep(tid, t)
				s.rid = ""
			}
			return
		}
		// Boundary calls above it lost their exit.
		b.closeBounds(tid, t, i, len(s.bounds), e.BootNs)
	}
}

// innerCall tells whether a call of stage, begun on a thread with calls
// open, is part of the call it runs in rather than a stage call: in a spec
// whose stages name no request, a later stage inside an earlier one
// (transformers' draft runs the assistant model's generate(), whose
// forward is the verify's function when both models are of one class).
// Such a spec has no accept, the one later stage an earlier one calls.
func (b *Builder) innerCall(t *thread, stage string) bool {
	if !b.Streams || len(t.open) == 0 {
		return false
	}
	if t.open[len(t.open)-1].inner {
		return true
	}
	top := b.sites[t.open[0].site].Stage
	return spanschema.Order(top) >= 0 && spanschema.Order(top) < spanschema.Order(stage)
}

// stepIdle tells whether a stream thread's step, with no call open, ended
// long enough before now to be handed on without waiting for the thread's
// next call: within half of StreamIdle, so that the sink, which ends a
// request after as long without a step, has its last step first.
func (b *Builder) stepIdle(t *thread, now uint64) bool {
	if !b.Streams || b.StreamIdle <= 0 || len(t.open) > 0 || len(t.step) == 0 {
		return false
	}
	var end uint64
	for _, c := range t.step {
		end = max(end, c.EndBoot)
	}
	return now > end && time.Duration(now-end) > b.StreamIdle/2
}

// closeBounds ends the thread's boundary calls from..to; where one of them
// opened the thread's request, the request ends at at: its stage calls still
// open lost their exit.
func (b *Builder) closeBounds(tid uint32, t *thread, from, to int, at uint64) {
	s := &t.stream
	opened := slices.ContainsFunc(s.bounds[from:to], func(c boundCall) bool { return c.opened })
	s.bounds = slices.Delete(s.bounds, from, to)
	if !opened {
		return
	}
	for j := len(t.open) - 1; j >= 0; j-- {
		b.cut(tid, t, t.open[j], at, CutExitMissed, "stage exit was not seen: the request's boundary call returned")
	}
	t.open = t.open[:0]
	b.endStep(tid, t)
	s.boundary, s.rid = "", ""
}

// endStream forgets the thread's request: its next step begins another
// (events of the thread were lost, a boundary exit among them maybe).
func (t *thread) endStream() {
	t.stream.bounds, t.stream.boundary, t.stream.rid = t.stream.bounds[:0], "", ""
}

// streamRequest is the request a step of calls that named none serves.
func (b *Builder) streamRequest(tid uint32, t *thread, calls []Call) string {
	s := &t.stream
	start, end := calls[0].Start, calls[0].End
	for _, c := range calls[1:] {
		start, end = minTime(start, c.Start), maxTime(end, c.End)
	}
	if s.boundary == "" && s.rid != "" && b.StreamIdle > 0 && start.Sub(s.lastEnd) > b.StreamIdle {
		s.rid = ""
	}
	if s.rid == "" {
		s.n++
		name := s.boundary
		if name == "" {
			name = "thread"
		}
		s.rid = fmt.Sprintf("%s-%d-%d", name, tid, s.n)
	}
	s.lastEnd = maxTime(s.lastEnd, end)
	return s.rid
}

func lastIndex(bounds []boundCall, site int) int {
	for i := len(bounds) - 1; i >= 0; i-- {
		if bounds[i].site == site {
			return i
		}
	}
	return -1
}

func countSite(bounds []boundCall, site int) int {
	n := 0
	for _, c := range bounds {
		if c.site == site {
			n++
		}
	}
	return n
}
