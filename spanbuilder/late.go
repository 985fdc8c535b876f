package spanbuilder

import (
	"math"
	"slices"
	"time"

	"github.com/specprobe/specprobe/spanschema"
)

// LateAccept holds a request's steps until the accepted count of their verify
// arrives, for engines that resolve acceptance on the host after the next
// step has already run (SGLang's overlap scheduler). Counts of a request
// arrive in the order of its verifies, so they are matched first in, first out.
// Only requests whose verifies were all traced can be matched that way; the
// others (already decoding when tracing began) pass through without counts.
type LateAccept struct {
	next Sink
	reqs map[string]*lateReq
	// Steps waiting longer than this for their count go on without it.
	GiveUpAfter time.Duration
	Matched     uint64 // verifies that got their count
	Unmatched   uint64 // verifies that went on without one
	Drafts      int64  // sum of the counts matched: drafts accepted
}

type lateReq struct {
	held   []Step
	counts []int64
	last   time.Time
}

// NewLateAccept returns a LateAccept in front of next.
func NewLateAccept(next Sink) *LateAccept {
	return &LateAccept{next: next, reqs: map[string]*lateReq{}, GiveUpAfter: 2 * time.Second}
}

// Follow starts matching counts for a request whose first verify is traced.
func (l *LateAccept) Follow(rid string) {
	if l.reqs[rid] == nil {
		l.reqs[rid] = &lateReq{}
	}
}

// Step implements Sink.
func (l *LateAccept) Step(s Step) {
	r := l.reqs[s.RequestID]
	if r == nil {
		if slices.ContainsFunc(s.Calls, func(c Call) bool { return c.Stage == spanschema.Verify }) {
			l.Unmatched++ // not followed: its count cannot be placed for sure
		}
		l.next.Step(s)
		return
	}
	r.held = append(r.held, s)
	r.last = s.End
	l.release(r, false)
}

// Accepted records the next verify's accepted count of a request.
func (l *LateAccept) Accepted(rid string, n int64, at time.Time) {
	r := l.reqs[rid]
	if r == nil {
		return
	}
	r.counts = append(r.counts, n)
	if at.After(r.last) {
		r.last = at
	}
	l.release(r, false)
}

// NoDrafts records that the request's next verify checked no draft (a
// prefill in vLLM's batch): it gets no count, and keeps its place in line.
func (l *LateAccept) NoDrafts(rid string, at time.Time) { l.Accepted(rid, noCount, at) }

// noCount stands in a request's counts for a verify without drafts.
const noCount = math.MinInt64

func (l *LateAccept) release(r *lateReq, force bool) {
	for len(r.held) > 0 {
		s := r.held[0]
		// A verify that raised produced no tokens: the count is the last
		// completed verify's (a retry in the same step).
		if v := lastVerify(s.Calls); v >= 0 {
			if len(r.counts) == 0 {
				if !force {
					return
				}
				l.Unmatched++
			} else if n := r.counts[0]; n == noCount {
				r.counts = r.counts[1:]
			} else {
				c := &s.Calls[v]
				c.Values = append(slices.Clone(c.Values), Value{Name: spanschema.ValueCorrect, V: n})
				l.Drafts += n
				r.counts = r.counts[1:]
				l.Matched++
			}
		}
		r.held = r.held[1:]
		l.next.Step(s)
	}
}

func lastVerify(calls []Call) int {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Stage == spanschema.Verify && calls[i].Err == "" {
			return i
		}
	}
	return -1
}

// ForgetAll stops matching every request followed so far, releasing their
// steps without counts: used when a count may have been lost.
func (l *LateAccept) ForgetAll() {
	for rid, r := range l.reqs {
		l.release(r, true)
		delete(l.reqs, rid)
	}
}

// Expire releases what waited too long for its counts.
func (l *LateAccept) Expire(now time.Time) {
	for rid, r := range l.reqs {
		if now.Sub(r.last) >= l.GiveUpAfter {
			l.release(r, true)
			if len(r.held) == 0 {
				delete(l.reqs, rid)
			}
		}
	}
}

// Close releases everything.
func (l *LateAccept) Close() { l.ForgetAll() }
