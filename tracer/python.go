package tracer

import (
	"fmt"
	"io"
	"time"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanbuilder"
)

// pyRequests reads, for Python stages, which requests a call serves, while
// the call still runs: its frame holds the batch it was given and the thread
// is busy inside it, so the object graph is not changing under the reads.
// The reads count only if the call's exit came after they ended; else the
// call names no request (counted as late) rather than maybe the wrong ones.
type pyRequests struct {
	proc    *pyproc.Process
	sess    *loader.Session
	pending map[callKey]pendingRead
	Stats   PyStats
}

// PyStats counts what the Python side could and could not read.
type PyStats struct {
	Reads, Late, Failed uint64
	// From the watchpoint hit to the end of the reads.
	MaxLag, SumLag time.Duration
	LastError      string
}

type callKey struct {
	site int
	tid  uint32
}

type pendingRead struct {
	rids []string
	end  uint64 // boot ns when the reads ended
	err  error
}

func newPyRequests(proc *pyproc.Process, sess *loader.Session) *pyRequests {
	return &pyRequests{proc: proc, sess: sess, pending: map[callKey]pendingRead{}}
}

// handle reads at a Python stage call's entry and hands the requests to the
// builder with the exit.
func (p *pyRequests) handle(e *spanbuilder.Event) {
	t, ok := p.sess.PySite(e.Site)
	if !ok || t.Stage.Requests == nil {
		return
	}
	key := callKey{e.Site, e.TID}
	if !e.Exit {
		rids, err := p.read(t, int(e.TID))
		end := spanbuilder.BootNow()
		p.Stats.MaxLag = max(p.Stats.MaxLag, time.Duration(end-e.BootNs))
		p.Stats.SumLag += time.Duration(end - e.BootNs)
		p.pending[key] = pendingRead{rids, end, err}
		return
	}
	r, ok := p.pending[key]
	delete(p.pending, key)
	switch {
	case !ok:
	case r.err != nil:
		p.Stats.Failed++
		p.Stats.LastError = fmt.Sprintf("%s: %v", t.Stage.Name, r.err)
	case e.BootNs < r.end:
		// The call had returned before the reads ended: they may have seen
		// the next batch. Better no requests than wrong ones.
		p.Stats.Late++
		e.Requests = []string{}
	default:
		p.Stats.Reads++
		e.Requests = r.rids
	}
}

func (p *pyRequests) read(t *loader.PyTarget, tid int) ([]string, error) {
	spec := t.Stage.Requests
	frame, err := p.proc.FindFrame(tid, t.Code.Addr)
	if err != nil {
		return nil, err
	}
	arg, err := p.proc.Local(frame, spec.Arg)
	if err != nil {
		return nil, err
	}
	// One evaluation for every id: it shares the type lookups across items.
	v, err := p.proc.Eval(arg, spec.Path+"."+spec.ID)
	if err != nil {
		return nil, err
	}
	items, ok := v.([]pyproc.Value)
	if !ok {
		return nil, fmt.Errorf("%s.%s: expected a list, got %T", spec.Path, spec.ID, v)
	}
	rids := make([]string, len(items))
	for i, it := range items {
		switch x := it.(type) {
		case string:
			rids[i] = x
		case int64, uint64:
			rids[i] = fmt.Sprint(x)
		default:
			return nil, fmt.Errorf("%s.%s: item %d: expected a str or int id, got %T", spec.Path, spec.ID, i, it)
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
	p.reqs = newPyRequests(p.proc, sess)
	return sess.ArmPython(p.targets)
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
		p.reqs.handle(e)
		add(e)
	}
}

func (p *pySession) stats() *PyStats {
	if p == nil {
		return nil
	}
	st := p.reqs.Stats
	return &st
}

func (p *pySession) close() {
	if p != nil {
		p.proc.Close()
	}
}
