package spanbuilder

import (
	"slices"
	"time"
)

// Stitcher holds each request's steps until the accepted count of their
// verify is known, then hands them on. Engines that resolve acceptance on the
// host one loop later (SGLang's overlap scheduler) only say how many drafts a
// request has accepted in total after how many verifies; the k-th verify of a
// request accepted total(k) - total(k-1).
type Stitcher struct {
	next Sink
	reqs map[string]*stitchReq
	// A request whose counts stop coming (it finished and its object is
	// gone) releases its held steps without a count after this long.
	GiveUpAfter time.Duration
	// Stitched counts verifies that got their count; Unresolved those
	// released without one.
	Stitched, Unresolved uint64
}

type stitchReq struct {
	held     []Step
	verifies int             // verify calls seen in held and released steps
	totals   map[int64]int64 // resolved verify count -> cumulative accepted
	base     int64           // resolved count at the first sighting
	seen     bool
	last     time.Time // wall time of the latest step or count
}

// NewStitcher returns a Stitcher in front of next.
func NewStitcher(next Sink) *Stitcher {
	return &Stitcher{next: next, reqs: map[string]*stitchReq{}, GiveUpAfter: 2 * time.Second}
}

func (st *Stitcher) req(rid string) *stitchReq {
	r := st.reqs[rid]
	if r == nil {
		r = &stitchReq{totals: map[int64]int64{}}
		st.reqs[rid] = r
	}
	return r
}

// Step implements Sink: the step waits for its verify's count.
func (st *Stitcher) Step(s Step) {
	r := st.req(s.RequestID)
	r.held = append(r.held, s)
	r.last = s.End
	st.release(s.RequestID, r, false)
}

// Counts records what a request's counters said at one moment: verifies
// resolved so far and drafts accepted over them. The first sighting is the
// base: verifies resolved before it were not traced.
func (st *Stitcher) Counts(rid string, resolved, accepted int64, at time.Time) {
	r := st.req(rid)
	if !r.seen {
		r.seen = true
		r.base = resolved
	}
	r.totals[resolved] = accepted
	if at.After(r.last) {
		r.last = at
	}
	st.release(rid, r, false)
}

// release hands on, in order, every held step whose verify count is known;
// with force, the rest too, without a count.
func (st *Stitcher) release(rid string, r *stitchReq, force bool) {
	for len(r.held) > 0 {
		s := r.held[0]
		v := slices.IndexFunc(s.Calls, func(c Call) bool { return c.Stage == "verify" })
		if v >= 0 {
			k := r.base + int64(r.verifies) + 1 // this verify's place among the resolved
			after, ok1 := r.totals[k]
			before, ok2 := r.totals[k-1]
			if !ok1 || !ok2 {
				if !force {
					return
				}
				st.Unresolved++
			} else {
				c := &s.Calls[v]
				c.Values = append(slices.Clone(c.Values), Value{Name: "num_correct_drafts", V: after - before})
				st.Stitched++
			}
			r.verifies++
		}
		r.held = r.held[1:]
		st.next.Step(s)
	}
}

// Expire releases the steps of requests whose counts stopped coming.
func (st *Stitcher) Expire(now time.Time) {
	for rid, r := range st.reqs {
		if now.Sub(r.last) >= st.GiveUpAfter {
			st.release(rid, r, true)
			delete(st.reqs, rid)
		}
	}
}

// Close releases everything still held.
func (st *Stitcher) Close() {
	for rid, r := range st.reqs {
		st.release(rid, r, true)
		delete(st.reqs, rid)
	}
}
