package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/specprobe/specprobe/daemon"
	"github.com/specprobe/specprobe/discover"
	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/redact"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

// attachOpts are attach's flags.
type attachOpts struct {
	pid          int
	specFile     string
	engine       string
	exporters    []string
	output       string
	duration     time.Duration
	noSkip       bool
	noMulti      bool
	quiet        bool
	idle         time.Duration
	wait         time.Duration
	flush        time.Duration
	noCUDA       bool
	cudaLaunches bool
	keptFrames   bool
	cmdline      string
	anyRank      bool
	queueMemory  string
	ringBuffer   string
	gpu          *gpuFlags
}

func attachCmd() *cobra.Command {
	o := &attachOpts{}
	cmd := &cobra.Command{
		Use:   "attach --pid PID [--engine NAME | --probes FILE] [--exporter NAME[=PATH]]...",
		Short: "Trace a running process until Ctrl-C, --duration or its exit",
		Example: `  sudo specprobe attach --pid 4242 --probes myengine.yaml
  sudo specprobe attach --pid 4242 --engine llamacpp --exporter otlp-file --output spans.jsonl --duration 30s
  sudo specprobe attach --pid 4242 --probes myengine.yaml --exporter perfetto --output trace.json
  sudo specprobe attach --pid 4242 --exporter otlp-file=spans.jsonl --exporter perfetto=trace.json`,
		Long: attachLong(),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd) },
	}
	o.addFlags(cmd.Flags())
	return cmd
}

func (o *attachOpts) addFlags(f *pflag.FlagSet) {
	o.gpu = addGPUFlags(f)
	f.IntVarP(&o.pid, "pid", "p", 0, "process to trace")
	f.StringVar(&o.specFile, "probes", "", "probe spec file (see docs/probe-spec.md)")
	f.StringVar(&o.engine, "engine", "", "catalog spec to use (specprobe probes list)")
	f.StringArrayVar(&o.exporters, "exporter", nil, "where spans go: "+export.Names()+"; NAME=PATH for files (repeatable)")
	f.StringVarP(&o.output, "output", "o", "", "output file of the file exporter (otlp-file, perfetto)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (default: until Ctrl-C or the target exits)")
	f.BoolVar(&o.noSkip, "no-endbr-skip", false, "probe a leading endbr64 itself instead of the next instruction (slower; for comparison)")
	f.BoolVar(&o.noMulti, "no-uprobe-multi", false, "attach one perf-event uprobe per site even where uprobe_multi exists")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no live summary line")
	f.DurationVar(&o.idle, "request-idle", 2*time.Second, "end a request's root span after it took part in no step for this long")
	f.DurationVar(&o.wait, "import-wait", 30*time.Second, "Python: how long to wait for a server's worker module (to choose the catalog spec) and then for each stage's module to be imported")
	f.DurationVar(&o.flush, "flush-timeout", tracer.DefaultFlushTimeout, "at the end, how long to wait for the exporters to deliver what is left (then it counts as dropped)")
	f.BoolVar(&o.anyRank, "any-rank", false, "trace the process even if it is not the rank its spec traces (match.ranks): its spans repeat those of the traced rank")
	f.BoolVar(&o.noCUDA, "no-cuda", false, "do not probe the CUDA driver (libcuda.so.1) for the time each stage blocked on the GPU and what it launched")
	f.BoolVar(&o.cudaLaunches, "cuda-launches", true, "count kernel and graph launches in the CUDA driver (false: probe its syncs only)")
	f.BoolVar(&o.keptFrames, "kept-frames", true, "Python 3.10, 3.11: end a stage call whose frame outlives its return (kept traceback, sys._getframe(), a watchdog holding sys._current_frames()) at that return, with a uprobe that costs about 1.4 µs for every Python frame that outlives its return, stage or not (an exception raised through a function is one); false: such a call is cut when its thread shows it over")
	f.StringVar(&o.cmdline, "command-line", "off", "put the target's command line on the spans as process.command_line: off, redacted (secrets in flags, variables, headers, URLs and JSON values replaced; README) or full")
	f.StringVar(&o.queueMemory, "queue-memory", DefaultQueueMemory, "bytes of spans each exporter may hold while it waits on its output, e.g. 64MiB (past them, and past 65536 spans, spans are dropped and counted, never the target slowed)")
	f.StringVar(&o.ringBuffer, "ring-buffer", "4MiB", "the kernel's ring buffer of events, a power of 2 from 4KiB to 1GiB (locked kernel memory): a larger one loses fewer events while specprobe is descheduled or a burst comes; what is lost is counted and the calls it leaves open are cut")
}

// DefaultQueueMemory is --queue-memory's default: 65536 spans of the
// ~1 KiB a queued span takes (spanrec's Cost) would be ~64 MiB anyway;
// this bound holds where spans are larger (many attributes, long ids).
const DefaultQueueMemory = "64MiB"

// check refuses flags that cannot work, before anything is read or armed.
func (o *attachOpts) check() (redact.Mode, int64, uint32, error) {
	if o.pid == 0 {
		return "", 0, 0, fmt.Errorf("--pid is required")
	}
	if err := checkDurations(o.duration, o.flush, o.idle, o.wait); err != nil {
		return "", 0, 0, err
	}
	if err := o.gpu.check(); err != nil {
		return "", 0, 0, err
	}
	mode, err := redact.ParseMode(o.cmdline)
	if err != nil {
		return "", 0, 0, fmt.Errorf("--command-line: %w", err)
	}
	queue, err := daemon.ParseSize(o.queueMemory)
	if err != nil || queue <= 0 {
		return "", 0, 0, fmt.Errorf("--queue-memory %q: want a size such as 64MiB", o.queueMemory)
	}
	// The kernel takes a ring of a power of 2 pages.
	ring, err := daemon.ParseSize(o.ringBuffer)
	if err != nil || ring < 4<<10 || ring > 1<<30 || ring&(ring-1) != 0 {
		return "", 0, 0, fmt.Errorf("--ring-buffer %q: want a power of 2 from 4KiB to 1GiB, such as 4MiB", o.ringBuffer)
	}
	return mode, queue, uint32(ring), nil
}

func (o *attachOpts) run(cmd *cobra.Command) error {
	cmdMode, queue, ring, err := o.check()
	if err != nil {
		return err
	}
	if err := loader.CheckPID(o.pid); err != nil {
		return err
	}
	if err := loader.CheckPrivileges(); err != nil {
		return err
	}
	spec, err := chooseSpec(o.pid, o.specFile, o.engine, o.anyRank, o.wait)
	if err != nil {
		return err
	}
	exps, closeFiles, err := export.Open(cmd.Context(), o.exporters, o.output, os.Stdout)
	if err != nil {
		return err
	}
	defer closeFiles()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := tracer.Config{
		PID: o.pid, Spec: spec, SkipEndbr: !o.noSkip, NoMulti: o.noMulti, Duration: o.duration,
		Exporters: exps, Log: os.Stderr, RequestIdle: o.idle, ImportWait: o.wait,
		FlushTimeout: o.flush, CommandLine: cmdMode, NoCUDA: o.noCUDA, NoCUDALaunches: !o.cudaLaunches, NoKeptFrames: !o.keptFrames,
		RingBytes: ring,
	}
	for range exps {
		cfg.QueueBudgets = append(cfg.QueueBudgets, export.NewBudget(queue))
	}
	if err := o.gpu.apply(cmd.Context(), &cfg, o.exporters); err != nil {
		return err
	}
	if !o.quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		cfg.Live = os.Stderr
	}
	_, err = tracer.Run(ctx, cfg)
	return err
}

func attachLong() string {
	return `Arms entry and exit probes on the stages a probe spec names, in PID only, and
emits spans in SGLang's own schema (docs/spans.md): one root span per request
(named as the engine's users know it: SGLang's " Req <id[:8]>", vLLM's
llm_request, llama.cpp's "task <id>"; the full id is always its rid), a thread
span, one decode_forward over the request's decode phase with a decode_loop
per step, and spec_draft / spec_verify / spec_draft_extend spans under it.

The spec comes from --probes FILE, from the catalog with --engine NAME, or is
picked from the catalog by matching the process (specprobe probes list).

Python stages (SGLang, vLLM, any CPython 3.10-3.13 program: module + qualname
in the spec) are found in the process's memory and watched with a hardware
watchpoint on each function's code object, on every thread: no change to the
target, no cost to its other calls. x86 has 4 debug registers per thread, so
at most 4 Python stages. A stage whose module is not imported yet (engines
import their workers after loading the model) is waited for (--import-wait);
so is, without --engine or --probes, a server that matches a catalog spec by
its title alone (an SGLang scheduler loading its model): the variant is
chosen once its worker's module appears.

Exporters (--exporter, repeatable):
` + export.Help() + `File exporters write to NAME=PATH or --output. Without --exporter, spans go to
OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set.

specprobe detaches completely on Ctrl-C, SIGTERM, --duration expiry or the
target's exit; a stage in progress then ends with an error status. What the
exporters have not delivered after --flush-timeout (5s) is counted as dropped:
an unreachable collector delays the exit, it does not fail it.

GPU state: the GPUs the process has a compute context on are sampled through
NVML (--gpu-interval, --gpu-process-interval, --gpu-gpm-interval; --no-gpu to
skip); a stage span gets a GPU value (hw.*, specprobe.gpu.*) only with the
window it covers (specprobe.gpu.window.*) and only where that window can
describe the span; gpu_window spans carry energy per step and per accepted
token (--gpu-window); Perfetto gets GPU counter tracks; and with --metrics-exporter (or OTLP span export) the samples and the
acceptance rate, accepted tokens per verify and energy per accepted token go
out as OTLP metrics. Without NVML or a GPU one line says so and tracing goes on.

CUDA: where the process maps the CUDA driver (libcuda.so.1), its
synchronizing calls and launches are probed too (--no-cuda to skip,
--cuda-launches=false for the syncs only): each stage span gets the time its
thread blocked on the GPU and the kernels and graphs it launched
(specprobe.cuda.*), each decode_loop the same outside its stages.`
}

// chooseSpec loads --probes, or --engine from the catalog, or finds the
// catalog spec that matches the process (waiting up to wait for a Python
// server to import its worker; 0, as probes check does, only says it has
// not); a process that is not the rank the spec traces is refused unless
// anyRank.
func chooseSpec(pid int, file, engine string, anyRank bool, wait time.Duration) (*probes.Spec, error) {
	args, _ := procfs.Cmdline(pid)
	title := probes.Title(args)
	var spec *probes.Spec
	var err error
	switch {
	case file != "" && engine != "":
		return nil, fmt.Errorf("give --probes or --engine, not both")
	case file != "":
		spec, err = probes.Load(file)
	case engine != "":
		spec, err = probes.Lookup(engine)
	default:
		spec, err = detectSpec(pid, anyRank, wait)
	}
	if err == nil && !anyRank {
		err = spec.CheckRank(title)
	}
	var other *probes.OtherRankError
	if errors.As(err, &other) {
		return nil, otherRank(pid, other)
	}
	return spec, err
}

// detectSpec finds the catalog spec that matches the process, waiting up
// to wait for a Python server that has not imported its worker yet.
func detectSpec(pid int, anyRank bool, wait time.Duration) (*probes.Spec, error) {
	specs, err := probes.Catalog()
	if err != nil {
		return nil, err
	}
	s, python, err := tracer.Detect(specs, pid, anyRank, wait, func(msg string) { fmt.Fprintln(os.Stderr, "specprobe: "+msg) })
	if s != nil {
		fmt.Fprintf(os.Stderr, "specprobe: engine detected: %s%s\n", s.Label(), python)
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("PID %d (%s) matches no catalog spec; name one with --engine (specprobe probes list) or write your own and pass --probes FILE (docs/probe-spec.md)", pid, loader.Label(pid))
}

// otherRank says a process is not the rank its spec traces, which process
// of its group is (a process started by the same parent with the traced
// rank's title), and how to trace this one anyway.
func otherRank(pid int, e *probes.OtherRankError) error {
	msg := fmt.Sprintf("PID %d: %v", pid, e)
	if want := e.Spec.PeerTitle(e.Title); want != "" {
		if peer := peerTitled(pid, want); peer > 0 {
			msg += fmt.Sprintf("; its group's traced rank is PID %d (%s): attach to it", peer, want)
		} else {
			msg += fmt.Sprintf("; no process titled %s was found beside it", want)
		}
	}
	return errors.New(msg + "; or pass --any-rank to trace this one anyway (its spans then repeat the traced rank's)")
}

// peerTitled finds a process with the same parent as pid titled title; 0
// when there is none.
func peerTitled(pid int, title string) int {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return 0
	}
	pids, _ := discover.Scan()
	for _, p := range pids {
		if p == pid {
			continue
		}
		if ps, err := procfs.ReadStat(p); err != nil || ps.PPID != st.PPID {
			continue
		}
		if args, err := procfs.Cmdline(p); err == nil && probes.Title(args) == title {
			return p
		}
	}
	return 0
}

// checkDurations refuses a negative --duration (0 means no limit),
// --request-idle (0: the span builder's default) or --import-wait (0: do
// not wait), and a flush timeout that would drop every span.
func checkDurations(duration, flush, idle, wait time.Duration) error {
	if duration < 0 {
		return fmt.Errorf("--duration %s: want a positive duration, or 0 to trace until Ctrl-C or the target's exit", duration)
	}
	if flush <= 0 {
		return fmt.Errorf("--flush-timeout %s: want a positive duration", flush)
	}
	if idle < 0 {
		return fmt.Errorf("--request-idle %s: want a positive duration (how long a request may take part in no step before its span ends)", idle)
	}
	if wait < 0 {
		return fmt.Errorf("--import-wait %s: want a positive duration, or 0 not to wait for Python modules", wait)
	}
	return nil
}
