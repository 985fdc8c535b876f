// Package daemon is fleet mode: it finds inference processes on the node (a
// /proc scan, then exec notification), matches them to probe specs, traces
// each in its own session, detaches when they exit or exec, and reports on
// itself over HTTP (/metrics, /healthz, /readyz, /targets) and OTLP.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/specprobe/specprobe/discover"
	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/k8smeta"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/specmetrics"
	"github.com/specprobe/specprobe/tracer"
)

// Options is one daemon run.
type Options struct {
	Config
	// Specs are tried in order: user specs first, then the catalog.
	Specs []*probes.Spec
	// Exporters are shared by every session; the daemon shuts them down
	// when it ends.
	Exporters     []tracer.Exporter
	MetricReaders []sdkmetric.Reader
	// Meta gives a process's place in Kubernetes (its resource attributes,
	// and the pod for the select keys); nil outside Kubernetes.
	Meta func(ctx context.Context, pid int) k8smeta.Info
	Log  io.Writer
	// Listening, when set, gets the address /metrics is served on.
	Listening func(addr string)
	// Notify, when set, is told of each attach and detach (tests, scripts).
	Notify func(Event)
	// RescanEvery is how often /proc is read again in full when no exec
	// notification was lost (30s when 0); tests shorten it.
	RescanEvery time.Duration
}

// Event is an attach or a detach.
type Event struct {
	Kind   string // "attached", "detached", "failed"
	PID    int
	Engine string // the spec
	At     time.Time
	Reason string
	Result *tracer.Result // what a detached session saw
}

func (d *Daemon) notify(e Event) {
	if d.opts.Notify != nil {
		e.At = time.Now()
		d.opts.Notify(e)
	}
}

// Daemon traces every matching process on the node.
type Daemon struct {
	opts     Options
	budget   *Budget
	budgets  memBudgets           // what each session may hold
	queues   []*export.Budget     // bytes of queued spans, one per exporter, shared by the sessions
	spec     *specmetrics.Metrics // every target's series, on /metrics and OTLP
	shared   []tracer.Exporter
	log      *lineLog
	ctx      context.Context
	done     chan sessionEnd
	lastLoop atomic.Int64
	ready    atomic.Bool
	execs    *discover.Execs

	// looks brings workers' results to the main loop; it holds one per
	// worker, so a worker never waits to hand one in.
	looks       chan look
	pythonSpecs bool // some spec has a Python stage

	mu      sync.Mutex
	targets map[int]*target
	cands   map[int]*candidate
	failed  map[discover.ID]bool // matched, could not be attached: not retried until an exec
	ignored map[discover.ID]bool // matches no spec and never will (not Python)
	history map[discover.ID]*history
	// execBuckets rate-limit each user's execs (discover.go).
	execBuckets map[execKey]*bucket
	working     int         // workers looking at a candidate
	busyUID     map[int]int // of those, per user
	totals      Totals      // of ended sessions, and the daemon's own counters
	// fileErr is the first session's failure to write its spans to an
	// output file: the daemon's exit status says so.
	fileErr error
}

// New checks the options; Run starts the work.
func New(opts Options) (*Daemon, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if len(opts.Specs) == 0 {
		return nil, errors.New("no probe spec to match processes against")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	d := &Daemon{opts: opts, budget: NewBudget(opts.EventBudget), log: &lineLog{w: opts.Log},
		done: make(chan sessionEnd), looks: make(chan look, examineWorkers), targets: map[int]*target{}, cands: map[int]*candidate{},
		failed: map[discover.ID]bool{}, ignored: map[discover.ID]bool{}, history: map[discover.ID]*history{},
		busyUID: map[int]int{}, execBuckets: map[execKey]*bucket{}, totals: Totals{Rejected: map[string]uint64{}}}
	for _, s := range opts.Specs {
		d.pythonSpecs = d.pythonSpecs || s.IsPython()
	}
	limit, _ := ParseSize(opts.MemoryLimit) // checked by Validate
	d.budgets = budgets(memoryLimit(limit), opts.MaxProcesses, len(opts.Exporters))
	turn := make(chan struct{}, 1)
	for _, e := range opts.Exporters {
		d.shared = append(d.shared, tracer.Exporter{Name: e.Name, Exporter: sharedExporter{turn, e.Out()}})
		d.queues = append(d.queues, export.NewBudget(d.budgets.queue))
	}
	return d, nil
}

// Run works until ctx is done, then detaches from every target.
func (d *Daemon) Run(ctx context.Context) error {
	if d.budgets.goLimit > 0 {
		debug.SetMemoryLimit(d.budgets.goLimit)
	}
	mp, reg, err := newMeter(d.Totals, d.opts.MetricReaders)
	if err != nil {
		return err
	}
	if d.spec, err = specmetrics.New(mp.Meter("github.com/specprobe/specprobe")); err != nil {
		return err
	}
	defer d.shutdown(mp.Shutdown)
	addr, srv, err := serve(d.opts.Listen, d.handler(reg, true), "listen or --listen")
	if err != nil {
		return err
	}
	defer srv.Close()
	if d.opts.MetricsListen != "" {
		_, srv, err := serve(d.opts.MetricsListen, d.handler(reg, false), "metrics_listen or --metrics-listen")
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	if d.opts.Listening != nil {
		d.opts.Listening(addr)
	}
	d.execs, err = discover.WatchExecs()
	if err != nil {
		return err
	}
	defer d.execs.Close()
	execCh := make(chan discover.Exec, 4096)
	go func() {
		if err := d.execs.Run(execCh); err != nil {
			d.log.printf("exec notification stopped: %v (new processes are found by the /proc rescan)", err)
		}
	}()

	var cancel context.CancelFunc
	d.ctx, cancel = context.WithCancel(ctx)
	defer cancel()
	d.touch()
	d.scan(false)
	d.ready.Store(true)
	d.log.printf("watching for inference processes (%d specs, at most %d at once, /metrics on %s)", len(d.opts.Specs), d.opts.MaxProcesses, addr)
	d.log.printf("memory: %s", d.budgets)

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastRate, lastScan := time.Now(), time.Now()
	lastEvents := uint64(0)
	execDrops := uint64(0)
	rescanEvery := d.opts.RescanEvery
	if rescanEvery <= 0 {
		rescanEvery = 30 * time.Second
	}
	for {
		select {
		case <-ctx.Done():
			d.stopAll()
			return d.shutdownExporters()
		case e := <-execCh:
			d.consider(e.PID, e.BootNs)
		case l := <-d.looks:
			now := time.Now()
			d.decide(l, now)
			d.mu.Lock()
			d.dispatchLocked(now)
			d.mu.Unlock()
		case e := <-d.done:
			d.finish(e)
		case now := <-tick.C:
			d.touch()
			d.mu.Lock()
			d.dispatchLocked(now)
			d.mu.Unlock()
			d.checkVariants(now)
			if now.Sub(lastRate) >= time.Second {
				t := d.Totals()
				d.budget.Observe(float64(t.Events-lastEvents) / now.Sub(lastRate).Seconds())
				lastEvents, lastRate = t.Events, now
			}
			// Lost exec notifications, and processes that matched nothing
			// earlier, are caught by a rescan; an exec storm that keeps
			// losing some rescans at most every 2s.
			if n := d.execs.Drops(); n != execDrops && now.Sub(lastScan) >= 2*time.Second || now.Sub(lastScan) >= rescanEvery {
				execDrops, lastScan = n, now
				d.scan(true)
			}
		}
	}
}

// serve listens on addr; what names the setting in the error. Requests
// are bounded in time and header size: the port may face the pod network.
func serve(addr string, h http.Handler, what string) (string, *http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("serving /metrics: %w (set %s to a free HOST:PORT)", err, what)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv, nil
}

func (d *Daemon) touch() { d.lastLoop.Store(time.Now().UnixNano()) }

// shutdown runs a final flush within flush_timeout.
func (d *Daemon) shutdown(f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.FlushTimeout)
	defer cancel()
	return f(ctx)
}

// shutdownExporters shuts the exporters down (Perfetto writes its file
// then) and returns what failed to be written to a file: then, or by a
// session.
func (d *Daemon) shutdownExporters() error {
	d.mu.Lock()
	errs := []error{d.fileErr}
	d.mu.Unlock()
	for _, e := range d.opts.Exporters {
		err := d.shutdown(e.Shutdown)
		if k, ok := export.Lookup(e.Name); ok && k.File && err != nil {
			d.log.printf("exporter %s: %v", e.Name, err)
			errs = append(errs, fmt.Errorf("exporter %s: %w", e.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (d *Daemon) scan(rescan bool) {
	pids, err := discover.Scan()
	if err != nil {
		d.log.printf("scanning /proc: %v", err)
		return
	}
	alive := map[discover.ID]bool{}
	for _, pid := range pids {
		if id, err := discover.Identify(pid); err == nil {
			alive[id] = true
		}
		d.consider(pid, 0)
	}
	if rescan {
		d.mu.Lock()
		d.totals.Rescans++
		for _, m := range []map[discover.ID]bool{d.failed, d.ignored} {
			for id := range m {
				if !alive[id] {
					delete(m, id)
				}
			}
		}
		for id := range d.history {
			if !alive[id] {
				delete(d.history, id)
			}
		}
		d.mu.Unlock()
	}
}

// Targets lists the processes traced now.
func (d *Daemon) Targets() []TargetInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []TargetInfo
	for _, t := range d.targets {
		out = append(out, t.info())
	}
	return out
}

// Totals is what the daemon has counted so far.
func (d *Daemon) Totals() Totals {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.totals
	t.Rejected = maps.Clone(d.totals.Rejected)
	t.ExecDrops = 0
	if d.execs != nil {
		t.ExecDrops = d.execs.Drops()
	}
	for _, s := range d.targets {
		if !s.attachedAt.IsZero() {
			t.Attached++
		}
		addProgress(&t, s.progress, s.costPerEvent)
	}
	t.SamplingRate = d.budget.Rate()
	for _, q := range d.queues {
		t.QueuedBytes += q.Used()
	}
	return t
}

func addProgress(t *Totals, p tracer.Progress, cost time.Duration) {
	t.Events += p.Events
	t.KernelDrops += p.Drops
	t.ProbeCost += time.Duration(p.Events) * cost
	for _, e := range p.Export {
		t.SpansExported += e.Exported
		t.SpansFailed += e.Failed
		t.SpansDropped += e.Dropped
		t.SpansShed += e.Shed
	}
}

// lineLog writes one line per message, from any goroutine. File names
// and other text a process controls go into messages: control characters
// are escaped, so that no message can forge another line.
type lineLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineLog) printf(format string, args ...any) {
	msg := escapeControl(fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "specprobe daemon: %s\n", msg)
}

func escapeControl(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
