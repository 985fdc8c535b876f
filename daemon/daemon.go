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
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/specprobe/specprobe/discover"
	"github.com/specprobe/specprobe/probes"
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
	// Meta gives a process's resource attributes (Kubernetes metadata).
	Meta func(ctx context.Context, pid int) []attribute.KeyValue
	Log  io.Writer
	// Listening, when set, gets the address /metrics is served on.
	Listening func(addr string)
	// Notify, when set, is told of each attach and detach (tests, scripts).
	Notify func(Event)
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
	shared   []tracer.Exporter
	log      *lineLog
	ctx      context.Context
	done     chan sessionEnd
	lastLoop atomic.Int64
	ready    atomic.Bool
	execs    *discover.Execs

	mu      sync.Mutex
	targets map[int]*target
	cands   map[int]*candidate
	failed  map[discover.ID]bool // matched, could not be attached: not retried until an exec
	ignored map[discover.ID]bool // matches no spec and never will (not Python)
	totals  Totals               // of ended sessions, and the daemon's own counters
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
		done: make(chan sessionEnd), targets: map[int]*target{}, cands: map[int]*candidate{},
		failed: map[discover.ID]bool{}, ignored: map[discover.ID]bool{}}
	var mu sync.Mutex
	for _, e := range opts.Exporters {
		d.shared = append(d.shared, tracer.Exporter{Name: e.Name, SpanExporter: sharedExporter{&mu, e.SpanExporter}})
	}
	return d, nil
}

// Run works until ctx is done, then detaches from every target.
func (d *Daemon) Run(ctx context.Context) error {
	if limit, _ := ParseSize(d.opts.MemoryLimit); limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	mp, reg, err := newMeter(d.Totals, d.opts.MetricReaders)
	if err != nil {
		return err
	}
	defer shutdown(mp.Shutdown)
	ln, err := net.Listen("tcp", d.opts.Listen)
	if err != nil {
		return fmt.Errorf("serving /metrics: %w (set listen or --listen to a free HOST:PORT)", err)
	}
	srv := &http.Server{Handler: d.handler(reg), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer shutdown(srv.Shutdown)
	if d.opts.Listening != nil {
		d.opts.Listening(ln.Addr().String())
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
	d.log.printf("watching for inference processes (%d specs, at most %d at once, /metrics on %s)", len(d.opts.Specs), d.opts.MaxProcesses, ln.Addr())

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastRate, lastScan := time.Now(), time.Now()
	lastEvents := uint64(0)
	execDrops := uint64(0)
	for {
		select {
		case <-ctx.Done():
			d.stopAll()
			for _, e := range d.opts.Exporters {
				shutdown(e.Shutdown)
			}
			return nil
		case e := <-execCh:
			d.consider(e.PID, e.BootNs)
		case e := <-d.done:
			d.finish(e)
		case now := <-tick.C:
			d.touch()
			d.recheck(now)
			d.checkVariants(now)
			if now.Sub(lastRate) >= time.Second {
				t := d.Totals()
				d.budget.Observe(float64(t.Events-lastEvents) / now.Sub(lastRate).Seconds())
				lastEvents, lastRate = t.Events, now
			}
			// Lost exec notifications, and processes that matched nothing
			// earlier, are caught by a rescan.
			if n := d.execs.Drops(); n != execDrops || now.Sub(lastScan) >= 30*time.Second {
				execDrops, lastScan = n, now
				d.scan(true)
			}
		}
	}
}

func (d *Daemon) touch() { d.lastLoop.Store(time.Now().UnixNano()) }

func shutdown(f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = f(ctx)
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
		for _, m := range []map[discover.ID]bool{d.failed, d.ignored} {
			for id := range m {
				if !alive[id] {
					delete(m, id)
				}
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
	}
}

// lineLog writes one line per message, from any goroutine.
type lineLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "specprobe daemon: "+format+"\n", args...)
}
