// Package tracer runs one tracing session: resolve the spec in the target,
// arm the probes, feed events to the span builder, export spans, and detach
// when told to stop, when the duration is up or when the target exits.
package tracer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/redact"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
	"github.com/specprobe/specprobe/specmetrics"
)

// Config is one attach.
type Config struct {
	PID       int
	Spec      *probes.Spec
	SkipEndbr bool
	NoMulti   bool
	Duration  time.Duration // 0: until stopped or the target exits
	Exporters []Exporter
	Log       io.Writer // messages and the final summary
	Live      io.Writer // live summary line, nil for none
	// Attached, when set, is closed once every probe is armed (tests and
	// scripts start the workload then).
	Attached chan<- struct{}
	// ImportWait bounds the wait for a Python stage's module to be imported
	// (default 30s).
	ImportWait time.Duration
	// RequestIdle ends a request's root span after it took part in no step for
	// this long (default 2s).
	RequestIdle time.Duration

	// GPU, when set, samples the GPUs the target uses; its state goes on each
	// stage span, and out as metrics through MetricReaders (with the
	// speculative-decoding ratios). Unavailable GPU state is one log line.
	GPU           *gpu.Sampler
	MetricReaders []sdkmetric.Reader
	// SpecMetrics, when set, records the speculative-decoding metrics
	// (the daemon's, on its /metrics); else they go with MetricReaders.
	SpecMetrics *specmetrics.Target

	// Resource adds attributes to the process's resource (the daemon's
	// Kubernetes metadata); Sampler decides which requests' spans are kept
	// (default: all); Progress, when set, gets the running counts every tick.
	Resource []attribute.KeyValue
	Sampler  spanbuilder.Sampler
	Progress func(Progress)
	// QueueSize bounds the spans waiting for each exporter (default 65536);
	// past it spans are dropped and counted, never the target slowed.
	QueueSize int
	// QueueBudgets, when set, has a budget for each exporter (in
	// Exporters' order; nil: none) that also holds the bytes of its queued
	// spans; the daemon shares them among its sessions. Spans shed for want
	// of room count as dropped, and as Shed.
	QueueBudgets []*export.Budget
	// RingBytes sizes the ring buffer (a power of 2; default 4 MiB).
	RingBytes uint32
	// FlushTimeout bounds the export of what is left when the session ends,
	// spans and metrics together (default DefaultFlushTimeout). What is not
	// delivered by then is counted as dropped: an unreachable collector
	// delays the exit, it does not fail it.
	FlushTimeout time.Duration
	// CommandLine says whether the process's command line goes on the
	// resource as process.command_line: off (the default), redacted, full.
	CommandLine redact.Mode
	// NoCUDA leaves the CUDA driver unprobed (no specprobe.cuda.*
	// attributes); NoCUDALaunches probes its syncs only (tracer/cuda.go).
	NoCUDA         bool
	NoCUDALaunches bool
}

// DefaultFlushTimeout is FlushTimeout's default.
const DefaultFlushTimeout = 5 * time.Second

func flushTimeout(cfg Config) time.Duration {
	if cfg.FlushTimeout > 0 {
		return cfg.FlushTimeout
	}
	return DefaultFlushTimeout
}

// flushContext is the one deadline of a session's final exports.
func (cfg Config) flushContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), flushTimeout(cfg))
}

// Progress is what a session has counted so far.
type Progress struct {
	Events uint64 // read from the ring buffer
	Drops  uint64 // lost in the kernel: ring buffer full
	Export []ExportStats
}

// Exporter is a named span exporter (export.Open makes them from --exporter).
type Exporter = export.Named

// Result is what a session saw, for the final summary and for tests.
type Result struct {
	TargetExited bool
	Reason       string
	Stats        spanbuilder.Stats
	Read         loader.ReadStats
	Drops        uint64 // lost in the kernel: ring buffer full
	Export       []ExportStats
	Elapsed      time.Duration
	Python       *PyStats // nil without Python stages
	GPU          []string // summary lines of the GPU state
}

// ExportStats counts one exporter's spans.
type ExportStats struct {
	Name                      string
	Exported, Dropped, Failed uint64
	// Err is the exporter's first error ("" for none): of a write, a send
	// or its shutdown.
	Err  string
	Shed uint64 // of Dropped: no room left in its QueueBudget
}

// Run traces until ctx is done, the duration passes or the target exits.
// Where the spec puts stages in other processes of the target's server
// (tracer/server.go), each process is traced at once and their events
// make one set of spans.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	procs, err := placeStages(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range procs {
			p.py.close()
		}
	}()
	for _, p := range procs {
		if p.targets, err = loader.Resolve(p.pid, p.spec, cfg.SkipEndbr); err != nil {
			return nil, err
		}
		if p.py, err = preparePython(cfg, p.pid, p.spec); err != nil {
			return nil, err
		}
	}
	// The resource and the GPUs are those of the process making the spans.
	cfg.PID = procs[0].pid
	ranks := processRanks(cfg.PID, cfg.Spec)
	exps, resource := pipeline(cfg, ranks)
	// GPU state and metrics (tracer/gpu.go), before the probes: NVML's Init
	// can take a second, which events would otherwise wait out in the kernel.
	gpus := startGPU(cfg, ranks)
	abandon := func() {
		ctx, cancel := cfg.flushContext()
		defer cancel()
		gpus.stop(ctx, &spanbuilder.Stats{}, cfg)
		for _, e := range exps {
			_ = e.Shutdown(ctx)
		}
	}
	for _, p := range procs {
		p.cuda = findCUDA(cfg, p.pid)
		opts := loader.Options{NoMulti: cfg.NoMulti, RingBytes: cfg.RingBytes, CUDA: p.cuda, CUDALaunches: !cfg.NoCUDALaunches}
		if p.sess, err = loader.Attach(p.pid, p.targets, opts); err != nil {
			abandon()
			return nil, err
		}
		defer p.sess.Close()
		if err := p.py.arm(p.sess); err != nil {
			abandon()
			return nil, err
		}
		p.describe(cfg)
	}
	if cfg.Attached != nil {
		close(cfg.Attached)
	}

	sink := spanbuilder.NewOTelSink(func(spans []*spanrec.Span) {
		for _, e := range exps {
			e.Push(spans...)
		}
	}, resource, "github.com/specprobe/specprobe")
	sink.Sampler = cfg.Sampler
	if sm := cmp.Or(cfg.SpecMetrics, gpus.spec); sm != nil {
		sink.OnStep = sm.Step
	}
	labels := map[uint32]*threadLabels{}
	for _, p := range procs {
		labels[uint32(p.pid)] = newThreadLabels(p.pid, cfg.Spec.Engine, processRanks(p.pid, cfg.Spec))
	}
	sink.Thread = func(pid, tid uint32) spanschema.Thread {
		if l := labels[pid]; l != nil {
			return l.thread(pid, tid)
		}
		return labels[uint32(procs[0].pid)].thread(pid, tid)
	}
	if cfg.RequestIdle > 0 {
		sink.IdleAfter = cfg.RequestIdle
	}
	next, late, match := countMatching(procs, sink)
	var sites []spanbuilder.Site
	for _, p := range procs {
		p.base = len(sites)
		sites = append(sites, p.sess.Sites()...)
	}
	builder := spanbuilder.New(sites, spanbuilder.NewClock(), next)
	builder.Streams, builder.StreamIdle = !cfg.Spec.NamesRequests(), sink.IdleAfter
	// The first call whose values fail their spec's checks ends the trace:
	// neither it nor anything after it reaches the builder.
	// Holding the first events back (sanity.go) would put one process's
	// events behind another's: only a session of one process holds them.
	refusal := newRefusal()
	refused := refusal.ch
	checkers := make([]*checkedAdd, len(procs))
	checked := func(i int, add func(*spanbuilder.Event)) func(*spanbuilder.Event) {
		p := procs[i]
		checkers[i] = newCheckedAdd(processValueChecks(p.pid, p.targets), add, refusal, len(procs) == 1)
		return checkers[i].event
	}
	adds := make([]func(*spanbuilder.Event), len(procs))
	var merge *spanbuilder.Merge[func()]
	if len(procs) > 1 {
		merge = spanbuilder.NewMerge(len(procs), func(_ int, f func()) { f() })
		streams := map[uint32]uint32{} // thread: its process's DP group
		if match != nil {
			match.Stream = func(tid uint32) uint32 { return streams[tid] }
		}
		for i, p := range procs {
			base, stream, add := p.base, p.stream, builder.Add
			filter := p.py.filter(checked(i, func(e *spanbuilder.Event) { e.Site += base; add(e) }))
			adds[i] = func(e *spanbuilder.Event) {
				streams[e.TID] = stream
				merge.Mark(i, marked(e.BootNs))
				filter(e)
			}
		}
	} else {
		adds[0] = procs[0].py.filter(checked(0, builder.Add))
	}
	for i, p := range procs {
		var c counter
		switch {
		case match == nil:
		case merge != nil:
			c = orderedCounts{src: i, merge: merge, match: match, late: late}
		default:
			c = directCounts{match}
		}
		p.py.start(p.sess, late, c)
	}
	live := newLiveSummary(cfg.Live)
	accepted := stepCounts(cfg.Spec) && late == nil
	live.accepted = accepted
	gpus.attach(sink, live, exps)
	start := time.Now()

	stop := make(chan struct{})
	runCtx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	go func() {
		select {
		case <-runCtx.Done():
		case <-refused:
		}
		close(stop)
	}()

	events := func() (n, drops uint64) {
		for _, p := range procs {
			n += p.sess.Stats.Events
			drops += p.sess.Drops()
		}
		return n, drops
	}
	var lastTick time.Time
	tick := func(i int) {
		p := procs[i]
		// A thread that died mid-stage sends no exit. Look for dead threads
		// first, then drain, so an exit queued just before the death still pairs.
		open := builder.OpenThreads(uint32(p.pid))
		labels[uint32(p.pid)].see(open)
		dead := deadThreads(p.pid, open)
		p.sess.Drain(adds[i])
		checkers[i].tick(time.Now())
		if merge != nil {
			merge.Mark(i, marked(spanbuilder.BootNow()))
		}
		for _, tid := range dead {
			builder.ThreadGone(tid, spanbuilder.BootNow(), "thread exited during the stage")
		}
		builder.Expire(spanbuilder.BootNow())
		// What is the session's, not a process's: once an interval.
		if now := time.Now(); now.Sub(lastTick) >= 100*time.Millisecond || len(procs) == 1 {
			lastTick = now
			if late != nil {
				late.Expire(now)
			}
			sink.Expire(now)
			gpus.tick(sink, now)
			n, drops := events()
			live.update(builder, n, drops, exps)
			gpus.observe(&builder.Stats)
			if cfg.Progress != nil {
				cfg.Progress(Progress{Events: n, Drops: drops, Export: exportStats(cfg, exps)})
			}
		}
	}
	var exitedPID int
	var runErr error
	if len(procs) == 1 {
		var exited bool
		exited, runErr = procs[0].sess.Run(stop, 100*time.Millisecond, adds[0], func() { tick(0) })
		if exited {
			exitedPID = procs[0].pid
		}
	} else {
		exitedPID, runErr = runProcesses(procs, stop, 100*time.Millisecond, func(i int, e *spanbuilder.Event) { adds[i](e) }, tick)
	}
	for _, c := range checkers {
		c.release()
	}
	checkErr := refusal.err

	res := &Result{TargetExited: exitedPID != 0, Elapsed: time.Since(start)}
	for _, p := range procs {
		res.Read.Add(p.sess.Stats)
	}
	_, res.Drops = events()
	// Detach before the slow part (export flushing): the target pays nothing from here on.
	var closeErr error
	for _, p := range procs {
		closeErr = errors.Join(closeErr, p.sess.Close())
	}
	if merge != nil {
		merge.Flush()
	}
	switch {
	case checkErr != nil:
		res.Reason = "values read did not pass their checks"
		builder.Flush(spanbuilder.BootNow(), "tracing stopped: values read did not pass their checks")
	case exitedPID != 0:
		res.Reason = fmt.Sprintf("target PID %d exited", exitedPID)
		builder.Flush(spanbuilder.BootNow(), "process exited during the stage")
	case cfg.Duration > 0 && ctx.Err() == nil:
		res.Reason = fmt.Sprintf("duration %s elapsed", cfg.Duration)
		builder.Flush(spanbuilder.BootNow(), "tracing stopped before the stage returned")
	default:
		res.Reason = "interrupted"
		builder.Flush(spanbuilder.BootNow(), "tracing stopped before the stage returned")
	}
	if late != nil {
		late.CloseAll()
	}
	gpus.tick(sink, time.Now().Add(time.Minute)) // every closed window, the counters so far
	sink.Close()
	live.clear()
	res.Python = pyStats(procs, late)
	var shutErr error
	res.GPU, shutErr = flush(cfg, exps, gpus, &builder.Stats)
	res.Stats = builder.Stats
	res.Export = exportStats(cfg, exps)
	if cfg.Progress != nil {
		cfg.Progress(Progress{Events: res.Read.Events, Drops: res.Drops, Export: res.Export})
	}
	printSummary(cfg.Log, res, accepted)
	return res, errors.Join(checkErr, runErr, closeErr, shutErr, fileErrors(cfg, res.Export))
}

// describe says what was armed in the process.
func (p *procTrace) describe(cfg Config) {
	var modes []string
	if len(p.targets) > 0 && p.sess.Multi {
		modes = append(modes, "uprobe_multi")
	} else if len(p.targets) > 0 {
		modes = append(modes, "perf-event uprobes")
	}
	if len(p.sess.PyTargets) > 0 {
		modes = append(modes, "hardware watchpoints")
	}
	fmt.Fprintf(cfg.Log, "specprobe: attached to PID %d (%s), engine %s, %d stages (%s):\n", p.pid, p.label(), cfg.Spec.Engine, len(p.targets)+len(p.sess.PyTargets), strings.Join(modes, " and "))
	for _, t := range p.targets {
		fmt.Fprintf(cfg.Log, "  %-12s %s in %s at +%#x (%s)\n", t.Stage.Name, t.Symbol.Demangled, t.File.Path, t.Offset, t.First)
	}
	if len(p.targets) > 0 && p.targets[0].Layout != nil {
		fmt.Fprintf(cfg.Log, "  field offsets:\n")
		for _, line := range p.targets[0].Layout.Describe() {
			fmt.Fprintf(cfg.Log, "    %s\n", line)
		}
	}
	p.py.describe(cfg.Log)
	describeCUDA(cfg.Log, p.cuda, !cfg.NoCUDALaunches)
}

// flush delivers what is left, spans of every exporter and the metrics at
// the same time, within one FlushTimeout: every queue at once, so that one
// that misses the deadline does not leave the others (a Perfetto file
// written at shutdown) undone. Spans not delivered in time
// are counted as dropped: that is reported, not returned.
func flush(cfg Config, procs []*export.QueueProcessor, gpus *gpuSession, st *spanbuilder.Stats) ([]string, error) {
	ctx, cancel := cfg.flushContext()
	defer cancel()
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.Shutdown(ctx) })
	}
	var lines []string
	wg.Go(func() { lines = gpus.stop(ctx, st, cfg) })
	wg.Wait()
	var failed []error
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			fmt.Fprintf(cfg.Log, "specprobe: exporter %s: what it had not delivered after the %s flush timeout counts as dropped\n", cfg.Exporters[i].Name, flushTimeout(cfg))
		case !writesFile(cfg.Exporters[i]):
			failed = append(failed, fmt.Errorf("exporter %s: %w", cfg.Exporters[i].Name, err))
		}
	}
	return lines, errors.Join(failed...)
}

// writesFile: the exporter writes a file (otlp-file, perfetto), where a
// failed write is an error of the run (a full disk, a bad output path),
// not a collector's passing absence to count and carry on from.
func writesFile(e export.Named) bool {
	k, ok := export.Lookup(e.Name)
	return ok && k.File
}

// FileError says a file exporter did not write all its spans.
type FileError struct {
	Exporter string
	Failed   uint64
	Err      string // the first error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("exporter %s: %d spans not written: %s", e.Exporter, e.Failed, e.Err)
}

// fileErrors is a FileError for each file exporter that failed to write
// spans, or whose file could not be finished.
func fileErrors(cfg Config, st []ExportStats) error {
	var errs []error
	for i, e := range st {
		if writesFile(cfg.Exporters[i]) && (e.Failed > 0 || e.Err != "") {
			errs = append(errs, &FileError{Exporter: e.Name, Failed: e.Failed, Err: e.Err})
		}
	}
	return errors.Join(errs...)
}

func exportStats(cfg Config, procs []*export.QueueProcessor) []ExportStats {
	var out []ExportStats
	for i, p := range procs {
		e, d, f := p.Stats()
		st := ExportStats{Name: cfg.Exporters[i].Name, Exported: e, Dropped: d, Failed: f, Shed: p.Shed()}
		if err := p.Err(); err != nil {
			st.Err = err.Error()
		}
		out = append(out, st)
	}
	return out
}

// pipeline makes a queue per exporter and the resource of the process
// making the spans, which every span of the session points to.
func pipeline(cfg Config, ranks []probes.RankValue) ([]*export.QueueProcessor, *spanrec.Resource) {
	var procs []*export.QueueProcessor
	for i, e := range cfg.Exporters {
		size := cfg.QueueSize
		if size <= 0 {
			size = DefaultQueueSize
		}
		var budget *export.Budget
		if i < len(cfg.QueueBudgets) {
			budget = cfg.QueueBudgets[i]
		}
		procs = append(procs, export.NewQueueProcessor(e.Out(), size, min(512, size), time.Second, budget))
	}
	return procs, spanrec.NewResource(processResource(cfg, ranks))
}

// DefaultQueueSize is QueueSize's default.
const DefaultQueueSize = 65536

func deadThreads(pid int, tids []uint32) []uint32 {
	var dead []uint32
	for _, tid := range tids {
		if !procfs.TaskAlive(pid, int(tid)) {
			dead = append(dead, tid)
		}
	}
	return dead
}

// stepCounts tells whether a spec reads accepted counts with its calls
// (num_correct_drafts), so that the steps carry them.
func stepCounts(spec *probes.Spec) bool {
	for _, st := range spec.Stages {
		if _, ok := st.Values["num_correct_drafts"]; ok {
			return true
		}
	}
	return false
}
