package tracer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
)

// session is one Run, in the order Run takes its steps: load (place the
// stages, resolve them, prepare Python), startExport (queues, resource,
// GPU), attach (arm every process), buildSink and wire (the span builder
// and what feeds it), run (the event loop) and finish (detach, flush,
// summarise).
type session struct {
	cfg   Config
	procs []*procTrace

	exps     []*export.QueueProcessor
	resource *spanrec.Resource
	gpus     *gpuSession

	sink    *spanbuilder.OTelSink
	labels  map[uint32]*threadLabels
	builder *spanbuilder.Builder
	late    *spanbuilder.LateAccept
	match   *spanbuilder.CountMatcher

	refusal  *refusal
	checkers []*checkedAdd
	adds     []func(*spanbuilder.Event)
	merge    *spanbuilder.Merge[func()]

	live     *liveSummary
	accepted bool // the steps carry accepted counts from the calls' own reads
	lastTick time.Time
	start    time.Time
}

// load places the spec's stages in the target's processes and resolves
// each process's native and Python stages.
func (s *session) load() error {
	procs, err := placeStages(s.cfg)
	if err != nil {
		return err
	}
	s.procs = procs
	for _, p := range procs {
		if p.targets, err = loader.Resolve(p.pid, p.spec, s.cfg.SkipEndbr); err != nil {
			return err
		}
		if p.py, err = preparePython(s.cfg, p.pid, p.spec); err != nil {
			return err
		}
	}
	return nil
}

func (s *session) closePython() {
	for _, p := range s.procs {
		p.py.close()
	}
}

// startExport makes the exporters' queues and the resource, and starts
// the GPU sampler (tracer/gpu.go) before the probes: NVML's Init can take
// a second, which events would otherwise wait out in the kernel.
func (s *session) startExport() {
	// The resource and the GPUs are those of the process making the spans.
	s.cfg.PID = s.procs[0].pid
	ranks := processRanks(s.cfg.PID, s.cfg.Spec)
	s.exps, s.resource = pipeline(s.cfg, ranks)
	s.gpus = startGPU(s.cfg, ranks)
}

// abandon stops what startExport started, for a session that never ran.
func (s *session) abandon() {
	ctx, cancel := s.cfg.flushContext()
	defer cancel()
	s.gpus.stop(ctx, &spanbuilder.Stats{}, s.cfg)
	for _, e := range s.exps {
		_ = e.Shutdown(ctx)
	}
}

// attach arms every process's probes, and says what it armed.
func (s *session) attach() error {
	cfg := s.cfg
	for _, p := range s.procs {
		var err error
		p.cuda = findCUDA(cfg, p.pid)
		opts := loader.Options{NoMulti: cfg.NoMulti, RingBytes: cfg.RingBytes, CUDA: p.cuda, CUDALaunches: !cfg.NoCUDALaunches, NoKeptReturn: cfg.NoKeptFrames, Python: p.py != nil}
		if p.sess, err = loader.Attach(p.pid, p.targets, opts); err != nil {
			return err
		}
		if err := p.py.arm(p.sess); err != nil {
			return err
		}
		p.describe(cfg)
	}
	return nil
}

// closeProbes detaches every process armed so far (closing twice is
// harmless: finish detaches before it flushes).
func (s *session) closeProbes() {
	for _, p := range s.procs {
		if p.sess != nil {
			p.sess.Close()
		}
	}
}

// buildSink makes the span sink: exporters, sampler, metrics, thread
// labels and the request idle time.
func (s *session) buildSink() {
	cfg := s.cfg
	s.sink = spanbuilder.NewOTelSink(func(spans []*spanrec.Span) {
		for _, e := range s.exps {
			e.Push(spans...)
		}
	}, s.resource, "github.com/specprobe/specprobe")
	s.sink.Sampler, s.sink.Root = cfg.Sampler, cfg.Spec.Root
	if sm := cmp.Or(cfg.SpecMetrics, s.gpus.spec); sm != nil {
		s.sink.OnStep = sm.Step
	}
	s.labels = map[uint32]*threadLabels{}
	for _, p := range s.procs {
		s.labels[uint32(p.pid)] = newThreadLabels(p.pid, cfg.Spec, processRanks(p.pid, cfg.Spec))
	}
	first := uint32(s.procs[0].pid)
	s.sink.Thread = func(pid, tid uint32) spanschema.Thread {
		if l := s.labels[pid]; l != nil {
			return l.thread(pid, tid)
		}
		return s.labels[first].thread(pid, tid)
	}
	if cfg.RequestIdle > 0 {
		s.sink.IdleAfter = cfg.RequestIdle
	}
}

// wire makes the span builder and each process's way into it: count
// matching, value checks, the multi-process merge, the Python readers.
func (s *session) wire() {
	next, late, match := countMatching(s.procs, s.sink)
	s.late, s.match = late, match
	var sites []spanbuilder.Site
	for _, p := range s.procs {
		p.base = len(sites)
		sites = append(sites, p.sess.Sites()...)
	}
	s.builder = spanbuilder.New(sites, spanbuilder.NewClock(), next)
	// A spec whose stages name no request: each thread's steps make its requests.
	s.builder.Streams, s.builder.StreamIdle = !s.cfg.Spec.NamesRequests(), s.sink.IdleAfter
	// The first call whose values fail their spec's checks ends the trace:
	// neither it nor anything after it reaches the builder.
	s.refusal = newRefusal()
	s.checkers = make([]*checkedAdd, len(s.procs))
	s.adds = make([]func(*spanbuilder.Event), len(s.procs))
	if len(s.procs) > 1 {
		s.wireMerged(match)
	} else {
		s.adds[0] = s.procs[0].py.filter(s.checked(0, s.builder.Add))
	}
	for i, p := range s.procs {
		var c counter
		switch {
		case match == nil:
		case s.merge != nil:
			c = orderedCounts{src: i, merge: s.merge, match: match, late: late}
		default:
			c = directCounts{match}
		}
		p.py.start(p.sess, late, c)
	}
	s.live = newLiveSummary(s.cfg.Live)
	s.accepted = stepCounts(s.cfg.Spec) && late == nil
	s.live.accepted = s.accepted
	s.gpus.attach(s.sink, s.live, s.exps)
}

// checked puts process i's value checks in front of add. Holding the
// first events back (sanity.go) would put one process's events behind
// another's: only a session of one process holds them.
func (s *session) checked(i int, add func(*spanbuilder.Event)) func(*spanbuilder.Event) {
	p := s.procs[i]
	s.checkers[i] = newCheckedAdd(processValueChecks(p.pid, p.targets), add, s.refusal, len(s.procs) == 1)
	return s.checkers[i].event
}

// wireMerged feeds several processes' events to one builder in time order.
func (s *session) wireMerged(match *spanbuilder.CountMatcher) {
	s.merge = spanbuilder.NewMerge(len(s.procs), func(_ int, f func()) { f() })
	streams := map[uint32]uint32{} // thread: its process's DP group
	if match != nil {
		match.Stream = func(tid uint32) uint32 { return streams[tid] }
	}
	for i, p := range s.procs {
		base, stream, add := p.base, p.stream, s.builder.Add
		filter := p.py.filter(s.checked(i, func(e *spanbuilder.Event) { e.Site += base; add(e) }))
		s.adds[i] = func(e *spanbuilder.Event) {
			streams[e.TID] = stream
			s.merge.Mark(i, marked(e.BootNs))
			filter(e)
		}
	}
}

// run reads events until ctx is done, the duration passes, a value check
// refuses or a target exits; it returns the PID that exited (0 for none).
func (s *session) run(ctx context.Context) (exitedPID int, err error) {
	s.start = time.Now()
	stop := make(chan struct{})
	runCtx := ctx
	if s.cfg.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, s.cfg.Duration)
		defer cancel()
	}
	go func() {
		select {
		case <-runCtx.Done():
		case <-s.refusal.ch:
		}
		close(stop)
	}()
	const interval = 100 * time.Millisecond
	if len(s.procs) == 1 {
		exited, err := s.procs[0].sess.Run(stop, interval, s.adds[0], func() { s.tick(0) })
		if exited {
			exitedPID = s.procs[0].pid
		}
		return exitedPID, err
	}
	return runProcesses(s.procs, stop, interval, func(i int, e *spanbuilder.Event) { s.adds[i](e) }, s.tick)
}

// events is what every process's ring buffer delivered and lost.
func (s *session) events() (n, drops uint64) {
	for _, p := range s.procs {
		n += p.sess.Stats.Events
		drops += p.sess.Drops()
	}
	return n, drops
}

// tick drains process i's events and ages what waits.
func (s *session) tick(i int) {
	p, b := s.procs[i], s.builder
	// A thread that died mid-stage sends no exit. Look for dead threads
	// first, then drain, so an exit queued just before the death still pairs.
	open := b.OpenThreads(uint32(p.pid))
	s.labels[uint32(p.pid)].see(open)
	dead := deadThreads(p.pid, p.checked(open, b))
	// Drain reads what was queued when it began: the events made before
	// then are all read once it returns, those made while it ran (a long
	// backlog) not yet. So the time read up to is taken before it.
	began := spanbuilder.BootNow()
	p.sess.Drain(s.adds[i])
	p.readTo = marked(began)
	s.checkers[i].tick(time.Now())
	if s.merge != nil {
		s.merge.Mark(i, p.readTo)
	}
	for _, tid := range dead {
		at := spanbuilder.BootNow()
		b.ThreadGone(tid, at, "thread exited during the stage")
		p.py.forget(tid, at)
	}
	b.Expire(spanbuilder.BootNow())
	// What is the session's, not a process's: once an interval.
	if now := time.Now(); now.Sub(s.lastTick) >= 100*time.Millisecond || len(s.procs) == 1 {
		s.lastTick = now
		if s.late != nil {
			s.late.Expire(s.readTo())
		}
		s.sink.Expire(now)
		s.gpus.tick(s.sink, now)
		n, drops := s.events()
		s.live.update(b, n, drops, s.exps)
		s.gpus.observe(&b.Stats)
		if s.cfg.Progress != nil {
			s.cfg.Progress(Progress{Events: n, Drops: drops, Export: exportStats(s.cfg, s.exps)})
		}
	}
}

// readTo is the boot time before which every process's events have been
// read (and, merged, handed on): counts that came by then have been matched.
func (s *session) readTo() uint64 {
	t := s.procs[0].readTo
	for _, p := range s.procs[1:] {
		t = min(t, p.readTo)
	}
	return t
}

// finish detaches, closes what is still open with the reason the session
// ended, flushes the exporters and prints the summary.
func (s *session) finish(ctx context.Context, exitedPID int, runErr error) (*Result, error) {
	cfg := s.cfg
	for _, c := range s.checkers {
		c.release()
	}
	checkErr := s.refusal.err
	res := &Result{TargetExited: exitedPID != 0, Elapsed: time.Since(s.start)}
	for _, p := range s.procs {
		res.Read.Add(p.sess.Stats)
	}
	_, res.Drops = s.events()
	// Detach before the slow part (export flushing): the target pays nothing from here on.
	var closeErr error
	for _, p := range s.procs {
		closeErr = errors.Join(closeErr, p.sess.Close())
	}
	if s.merge != nil {
		s.merge.Flush()
	}
	res.Reason = s.closeOpen(ctx, checkErr, exitedPID)
	if s.late != nil {
		s.late.CloseAll()
	}
	s.gpus.tick(s.sink, time.Now().Add(time.Minute)) // every closed window, the counters so far
	s.sink.Close()
	s.live.clear()
	res.Python = pyStats(s.procs, s.late, s.match)
	var shutErr error
	res.GPU, shutErr = flush(cfg, s.exps, s.gpus, &s.builder.Stats)
	res.Stats = s.builder.Stats
	res.Export = exportStats(cfg, s.exps)
	if cfg.Progress != nil {
		cfg.Progress(Progress{Events: res.Read.Events, Drops: res.Drops, Export: res.Export})
	}
	printSummary(cfg.Log, res, s.accepted)
	return res, errors.Join(checkErr, runErr, closeErr, shutErr, fileErrors(cfg, res.Export))
}

// closeOpen ends the calls still open with why the session ended, and
// returns that reason for the summary.
func (s *session) closeOpen(ctx context.Context, checkErr error, exitedPID int) string {
	now := spanbuilder.BootNow()
	switch {
	case checkErr != nil:
		s.builder.Flush(now, "tracing stopped: values read did not pass their checks")
		return "values read did not pass their checks"
	case exitedPID != 0:
		s.builder.Flush(now, "process exited during the stage")
		return fmt.Sprintf("target PID %d exited", exitedPID)
	case s.cfg.Duration > 0 && ctx.Err() == nil:
		s.builder.Flush(now, "tracing stopped before the stage returned")
		return fmt.Sprintf("duration %s elapsed", s.cfg.Duration)
	default:
		s.builder.Flush(now, "tracing stopped before the stage returned")
		return "interrupted"
	}
}
