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

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/redact"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
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
	// NoKeptFrames leaves kept_return unarmed on Python 3.10 and 3.11
	// (loader/keptarm.go): it costs every frame that outlives its return.
	NoKeptFrames bool
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
// make one set of spans. The steps are session's (tracer/session.go).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	s := &session{cfg: cfg}
	defer s.closePython()
	if err := s.load(); err != nil {
		return nil, err
	}
	s.startExport()
	defer s.closeProbes()
	if err := s.attach(); err != nil {
		s.abandon()
		return nil, err
	}
	if cfg.Attached != nil {
		close(cfg.Attached)
	}
	s.buildSink()
	s.wire()
	exitedPID, runErr := s.run(ctx)
	return s.finish(ctx, exitedPID, runErr)
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
