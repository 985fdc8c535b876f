// Package tracer runs one tracing session: resolve the spec in the target,
// arm the probes, feed events to the span builder, export spans, and detach
// when told to stop, when the duration is up or when the target exits.
package tracer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/redact"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
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

	// Resource adds attributes to the process's resource (the daemon's
	// Kubernetes metadata); Sampler decides which requests' spans are kept
	// (default: all); Progress, when set, gets the running counts every tick.
	Resource []attribute.KeyValue
	Sampler  sdktrace.Sampler
	Progress func(Progress)
	// QueueSize bounds the spans waiting for each exporter (default 65536);
	// past it spans are dropped and counted, never the target slowed.
	QueueSize int
	// FlushTimeout bounds the export of what is left when the session ends,
	// spans and metrics together (default DefaultFlushTimeout). What is not
	// delivered by then is counted as dropped: an unreachable collector
	// delays the exit, it does not fail it.
	FlushTimeout time.Duration
	// CommandLine says whether the process's command line goes on the
	// resource as process.command_line: off (the default), redacted, full.
	CommandLine redact.Mode
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
}

// Run traces until ctx is done, the duration passes or the target exits.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	targets, err := loader.Resolve(cfg.PID, cfg.Spec, cfg.SkipEndbr)
	if err != nil {
		return nil, err
	}
	py, err := preparePython(cfg)
	if err != nil {
		return nil, err
	}
	defer py.close()
	ranks := processRanks(cfg.PID, cfg.Spec)
	procs, tp := pipeline(cfg, ranks)
	// GPU state and metrics (tracer/gpu.go), before the probes: NVML's Init
	// can take a second, which events would otherwise wait out in the kernel.
	gpus := startGPU(cfg, ranks)
	abandon := func() {
		ctx, cancel := cfg.flushContext()
		defer cancel()
		gpus.stop(ctx, &spanbuilder.Stats{}, cfg)
		_ = tp.Shutdown(ctx)
	}
	sess, err := loader.Attach(cfg.PID, targets, loader.Options{NoMulti: cfg.NoMulti})
	if err != nil {
		abandon()
		return nil, err
	}
	defer sess.Close()
	if err := py.arm(sess); err != nil {
		abandon()
		return nil, err
	}
	exe := loader.Exe(cfg.PID)
	var modes []string
	if len(targets) > 0 && sess.Multi {
		modes = append(modes, "uprobe_multi")
	} else if len(targets) > 0 {
		modes = append(modes, "perf-event uprobes")
	}
	if len(sess.PyTargets) > 0 {
		modes = append(modes, "hardware watchpoints")
	}
	mode := strings.Join(modes, " and ")
	fmt.Fprintf(cfg.Log, "specprobe: attached to PID %d (%s), engine %s, %d stages (%s):\n", cfg.PID, exe, cfg.Spec.Engine, len(targets)+len(sess.PyTargets), mode)
	for _, t := range targets {
		fmt.Fprintf(cfg.Log, "  %-12s %s in %s at +%#x (%s)\n", t.Stage.Name, t.Symbol.Demangled, t.File.Path, t.Offset, t.First)
	}
	if len(targets) > 0 && targets[0].Layout != nil {
		fmt.Fprintf(cfg.Log, "  field offsets:\n")
		for _, line := range targets[0].Layout.Describe() {
			fmt.Fprintf(cfg.Log, "    %s\n", line)
		}
	}
	py.describe(cfg.Log)
	if cfg.Attached != nil {
		close(cfg.Attached)
	}

	sink := spanbuilder.NewOTelSink(tp.Tracer("github.com/specprobe/specprobe"))
	labels := newThreadLabels(cfg.PID, cfg.Spec.Engine, ranks)
	sink.Thread = labels.thread
	if cfg.RequestIdle > 0 {
		sink.IdleAfter = cfg.RequestIdle
	}
	builder := spanbuilder.New(sess.Sites(), spanbuilder.NewClock(), py.sink(sink, sess))
	// The first call whose values fail their spec's checks ends the trace:
	// neither it nor anything after it reaches the builder.
	checked := newCheckedAdd(processValueChecks(cfg.PID, targets), builder.Add)
	refused := checked.refused
	add := py.filter(checked.event)
	live := newLiveSummary(cfg.Live)
	accepted := stepCounts(cfg.Spec) && !py.lateCounts()
	live.accepted = accepted
	gpus.attach(sink, live)
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

	tick := func() {
		// A thread that died mid-stage sends no exit. Look for dead threads
		// first, then drain, so an exit queued just before the death still pairs.
		open := builder.OpenThreads()
		labels.see(open)
		dead := deadThreads(cfg.PID, open)
		sess.Drain(add)
		checked.tick(time.Now())
		for _, tid := range dead {
			builder.ThreadGone(tid, spanbuilder.BootNow(), "thread exited during the stage")
		}
		py.expire(time.Now())
		sink.Expire(time.Now())
		live.update(builder, sess, procs)
		gpus.observe(&builder.Stats)
		if cfg.Progress != nil {
			cfg.Progress(Progress{Events: sess.Stats.Events, Drops: sess.Drops(), Export: exportStats(cfg, procs)})
		}
	}
	exited, runErr := sess.Run(stop, 100*time.Millisecond, add, tick)
	checked.release()
	checkErr := checked.err

	res := &Result{TargetExited: exited, Read: sess.Stats, Drops: sess.Drops(), Elapsed: time.Since(start)}
	// Detach before the slow part (export flushing): the target pays nothing from here on.
	closeErr := sess.Close()
	switch {
	case checkErr != nil:
		res.Reason = "values read did not pass their checks"
		builder.Flush(spanbuilder.BootNow(), "tracing stopped: values read did not pass their checks")
	case exited:
		res.Reason = fmt.Sprintf("target PID %d exited", cfg.PID)
		builder.Flush(spanbuilder.BootNow(), "process exited during the stage")
	case cfg.Duration > 0 && ctx.Err() == nil:
		res.Reason = fmt.Sprintf("duration %s elapsed", cfg.Duration)
		builder.Flush(spanbuilder.BootNow(), "tracing stopped before the stage returned")
	default:
		res.Reason = "interrupted"
		builder.Flush(spanbuilder.BootNow(), "tracing stopped before the stage returned")
	}
	py.flush()
	sink.Close()
	live.clear()
	res.Python = py.stats()
	var shutErr error
	res.GPU, shutErr = flush(cfg, procs, tp, gpus, &builder.Stats)
	res.Stats = builder.Stats
	res.Export = exportStats(cfg, procs)
	if cfg.Progress != nil {
		cfg.Progress(Progress{Events: res.Read.Events, Drops: res.Drops, Export: res.Export})
	}
	printSummary(cfg.Log, res, accepted)
	return res, errors.Join(checkErr, runErr, closeErr, shutErr)
}

// flush delivers what is left, spans of every exporter and the metrics at
// the same time, within one FlushTimeout. Each span processor is shut down
// here rather than through the provider, which stops at the first
// processor that misses the deadline and would leave the others (a
// Perfetto file written at shutdown) undone. Spans not delivered in time
// are counted as dropped: that is reported, not returned.
func flush(cfg Config, procs []*export.QueueProcessor, tp *sdktrace.TracerProvider, gpus *gpuSession, st *spanbuilder.Stats) ([]string, error) {
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
	_ = tp.Shutdown(context.Background()) // its processors are shut down already
	var failed []error
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			fmt.Fprintf(cfg.Log, "specprobe: exporter %s: what it had not delivered after the %s flush timeout counts as dropped\n", cfg.Exporters[i].Name, flushTimeout(cfg))
		default:
			failed = append(failed, fmt.Errorf("exporter %s: %w", cfg.Exporters[i].Name, err))
		}
	}
	return lines, errors.Join(failed...)
}

func exportStats(cfg Config, procs []*export.QueueProcessor) []ExportStats {
	var out []ExportStats
	for i, p := range procs {
		e, d, f := p.Stats()
		out = append(out, ExportStats{Name: cfg.Exporters[i].Name, Exported: e, Dropped: d, Failed: f})
	}
	return out
}

func pipeline(cfg Config, ranks []probes.RankValue) ([]*export.QueueProcessor, *sdktrace.TracerProvider) {
	sampler := cfg.Sampler
	if sampler == nil {
		sampler = sdktrace.AlwaysSample()
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(processResource(cfg, ranks)),
		sdktrace.WithSampler(sampler),
	}
	var procs []*export.QueueProcessor
	for _, e := range cfg.Exporters {
		size := cfg.QueueSize
		if size <= 0 {
			size = 65536
		}
		p := export.NewQueueProcessor(e.SpanExporter, size, min(512, size), time.Second)
		procs = append(procs, p)
		opts = append(opts, sdktrace.WithSpanProcessor(p))
	}
	return procs, sdktrace.NewTracerProvider(opts...)
}

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
