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

// Accepted counts of Python accept stages, read from the target as they reach
// the host (a loop after their verify under SGLang's overlap scheduler) and
// matched to each request's verifies in order (pyRequests, spanbuilder.LateAccept).

// track keeps the first-in-first-out matching of late counts honest.
func (p *pyRequests) track(stage string, tid uint32, good bool, rids []string) {
	if p.late == nil {
		return
	}
	switch stage {
	case probes.Verify:
		if !good || rids == nil {
			// This verify has no span for its requests: a later count
			// must not land on the next one.
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
// frame of its caller, which is still running. They are held until the
// thread's next watched event: one that came before the reads ended means
// the thread had gone on, and the caller's frame found may have been its
// next call (the next step's batch and counts), so the counts are dropped.
func (p *pyRequests) accepted(t *loader.PyTarget, tid int) {
	if p.late == nil || t.ReadFrom == nil {
		return
	}
	frame, err := p.proc.FindFrame(tid, t.ReadFrom.Addr)
	h := heldCounts{}
	if err == nil {
		h.rids, h.counts, err = p.readCounts(frame, t.Stage)
	}
	h.err, h.end = err, spanbuilder.BootNow()
	p.held[uint32(tid)] = h
}

// heldCounts are accepted counts read as an accept stage returned.
type heldCounts struct {
	rids   []string
	counts []int64
	err    error
	end    uint64 // boot ns when the reads ended
}

// release applies the counts held for tid, now that its next watched event
// (at boot ns at) came, if that was after the reads ended.
func (p *pyRequests) release(tid uint32, at uint64) {
	h, ok := p.held[tid]
	if !ok {
		return
	}
	delete(p.held, tid)
	if h.err == nil && at < h.end {
		h.err = fmt.Errorf("the thread had gone on before the reads of the caller's frame ended")
	}
	p.applyCounts(h.rids, h.counts, h.err)
}

// noDrafts marks a request whose verify checked no draft (not in drafted).
const noDrafts = -1 << 62

// readCounts evaluates an accept stage's lists in frame: each request's
// accepted count, or noDrafts.
func (p *pyRequests) readCounts(frame *pyproc.Frame, st *probes.Stage) ([]string, []int64, error) {
	rids, err := p.evalIDs(frame, st.Requests.Arg, st.Requests.IDPath())
	if err != nil {
		return nil, nil, err
	}
	counts, err := p.evalCounts(frame, st.Accepted)
	if err != nil {
		return nil, nil, err
	}
	if len(counts) != len(rids) {
		return nil, nil, fmt.Errorf("%d requests but %d accepted counts", len(rids), len(counts))
	}
	if st.Drafted != nil {
		drafted, err := p.evalIDs(frame, st.Drafted.Arg, st.Drafted.Path)
		if err != nil {
			return nil, nil, err
		}
		for i, rid := range rids {
			if !slices.Contains(drafted, rid) {
				counts[i] = noDrafts
			}
		}
	}
	return rids, counts, nil
}

// applyCounts hands read counts to the matching; a failed read stops it.
func (p *pyRequests) applyCounts(rids []string, counts []int64, err error) {
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
		if counts[i] == noDrafts {
			p.late.NoDrafts(rid, now)
		} else {
			p.late.Accepted(rid, counts[i], now)
		}
	}
}

func (p *pyRequests) evalIDs(frame *pyproc.Frame, arg, path string) ([]string, error) {
	obj, err := p.proc.Local(frame, arg)
	if err != nil {
		return nil, err
	}
	return idList(p.proc, obj, path)
}

// evalCounts reads an accepted-count list: the items, or with Len each
// item's length, plus Add.
func (p *pyRequests) evalCounts(frame *pyproc.Frame, l *probes.PyList) ([]int64, error) {
	obj, err := p.proc.Local(frame, l.Arg)
	if err != nil {
		return nil, err
	}
	v, err := p.proc.Eval(obj, l.Path)
	if err != nil {
		return nil, err
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
			out[i] = int64(len(list)) + l.Add
			continue
		}
		n, ok := it.(int64)
		if !ok {
			return nil, fmt.Errorf("%s: item %d: expected an int, got %T", l.Path, i, it)
		}
		out[i] = n + l.Add
	}
	return out, nil
}
