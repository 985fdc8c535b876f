package daemon

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/discover"
	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/internal/ktime"
	"github.com/specprobe/specprobe/internal/redact"
	"github.com/specprobe/specprobe/k8smeta"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/tracer"
)

// A target is a process with a session running (attaching or attached).
type target struct {
	id           discover.ID
	exe, engine  string
	seen         time.Time // exec or first scan
	boot         uint64    // CLOCK_BOOTTIME ns of the look that matched
	attachedAt   time.Time // zero while attaching
	tries        int
	resource     []attribute.KeyValue
	cancel       context.CancelFunc
	progress     tracer.Progress
	costPerEvent time.Duration
	exec         bool // the process exec'd: look at it again once detached
	owner        Owner
	// Specs that would win over this one (variants.go), the interpreter
	// read to check them (a checker's while checking is set), when next,
	// and the one the target moves to.
	better    []*probes.Spec
	py        *pyproc.Process
	budget    *pyproc.Budget
	checking  bool
	ended     bool
	nextCheck time.Time
	upgrade   *probes.Spec
}

type sessionEnd struct {
	t   *target
	res *tracer.Result
	err error
}

// TargetInfo is one traced process, as /targets shows it.
type TargetInfo struct {
	PID        int       `json:"pid"`
	Exe        string    `json:"exe"`
	Engine     string    `json:"engine"`
	Attached   bool      `json:"attached"`
	Seen       time.Time `json:"seen"`
	AttachedAt time.Time `json:"attached_at,omitzero"`
	Events     uint64    `json:"events"`
	Drops      uint64    `json:"drops"`
	// Spans dropped on the way to the exporters, and of them those shed
	// because the span queues' share of memory_limit was full.
	SpansDropped       uint64            `json:"spans_dropped"`
	SpansDroppedMemory uint64            `json:"spans_dropped_memory"`
	Resource           map[string]string `json:"resource,omitempty"`
}

func (t *target) info() TargetInfo {
	i := TargetInfo{PID: t.id.PID, Exe: t.exe, Engine: t.engine, Attached: !t.attachedAt.IsZero(),
		Seen: t.seen, AttachedAt: t.attachedAt, Events: t.progress.Events, Drops: t.progress.Drops}
	for _, e := range t.progress.Export {
		i.SpansDropped += e.Dropped
		i.SpansDroppedMemory += e.Shed
	}
	if len(t.resource) > 0 {
		i.Resource = map[string]string{}
		for _, kv := range t.resource {
			i.Resource[string(kv.Key)] = kv.Value.Emit()
		}
	}
	return i
}

// attachTimeout bounds a session's attach: resolving the stages, waiting
// for a Python stage's module (ImportWait) and arming the probes.
const attachTimeout = 30 * time.Second

// start runs a session for the candidate; d.mu is held. meta is the pod
// metadata when the look fetched it already.
func (d *Daemon) start(c *candidate, spec *probes.Spec, owner Owner, meta *k8smeta.Info) {
	ctx, cancel := context.WithCancel(d.ctx)
	t := &target{id: c.id, exe: loader.Label(c.id.PID), engine: spec.Engine, seen: c.seen, boot: ktime.BootNow(), tries: c.tries + 1,
		cancel: cancel, costPerEvent: uprobeEventCost, better: d.betterSpecs(spec), owner: owner}
	if spec.IsPython() {
		t.costPerEvent = watchEventCost
	}
	d.targets[c.id.PID] = t
	attached := make(chan struct{})
	mode, _ := redact.ParseMode(d.opts.CommandLine) // checked by Validate
	cfg := tracer.Config{
		PID: c.id.PID, Spec: spec, SkipEndbr: true, Exporters: d.shared,
		Log: &prefixLog{l: d.log, prefix: fmt.Sprintf("PID %d: ", c.id.PID)}, Attached: attached,
		ImportWait: 5 * time.Second, QueueBudgets: d.queues, RingBytes: d.budgets.ring, FlushTimeout: d.opts.FlushTimeout, CommandLine: mode,
		Progress: func(p tracer.Progress) { d.mu.Lock(); t.progress = p; d.mu.Unlock() },
	}
	if d.opts.EventBudget > 0 {
		cfg.Sampler = d.budget.Sampler()
	}
	go func() {
		switch {
		case meta != nil:
			t.resource = meta.Attributes()
		case d.opts.Meta != nil:
			t.resource = d.lookupMeta(c.id.PID).Attributes()
		}
		cfg.Resource = t.resource
		cfg.SpecMetrics = d.spec.Target(spec.Engine, c.id.PID, t.resource...)
		go func() {
			select {
			case <-attached:
				d.mu.Lock()
				t.attachedAt = time.Now()
				d.totals.Attaches++
				d.mu.Unlock()
				d.log.printf("attached to PID %d (%s, %s) %s after it was found", t.id.PID, t.exe, t.engine, time.Since(t.seen).Round(time.Millisecond))
				d.notify(Event{Kind: "attached", PID: t.id.PID, Engine: t.engine})
			case <-time.After(attachTimeout):
				d.log.printf("PID %d (%s): not attached after %s: giving up", t.id.PID, t.exe, attachTimeout)
				cancel()
			case <-ctx.Done():
			}
		}()
		res, err := runSession(ctx, cfg)
		d.done <- sessionEnd{t, res, err}
	}()
}

// runSession is tracer.Run with a panic turned into the session's error:
// the probes are detached by tracer.Run's deferred Close on the way out,
// and the other sessions go on.
func runSession(ctx context.Context, cfg tracer.Config) (res *tracer.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("%w: %v\n%s", errPanic, r, debug.Stack())
		}
	}()
	return tracer.Run(ctx, cfg)
}

var errPanic = errors.New("panic")

// finish records a session's end; an attach that failed on a process that
// just started is tried again (a library may not be mapped yet).
func (d *Daemon) finish(e sessionEnd) {
	t := e.t
	d.mu.Lock()
	t.ended = true
	if t.py != nil && !t.checking {
		t.py.Close() // else the checker closes it
	}
	delete(d.targets, t.id.PID)
	addProgress(&d.totals, t.progress, t.costPerEvent)
	if fe := new(tracer.FileError); d.fileErr == nil && errors.As(e.err, &fe) {
		d.fileErr = fmt.Errorf("PID %d: %w", t.id.PID, fe)
	}
	attached := !t.attachedAt.IsZero()
	alive := false
	if id, err := discover.Identify(t.id.PID); err == nil && id == t.id {
		alive = true
	}
	switch {
	case attached:
		d.totals.Detaches++
		reason := "stopped"
		if e.res != nil {
			reason = e.res.Reason
		}
		if e.err != nil {
			reason += ": " + e.err.Error()
		}
		if t.upgrade != nil {
			reason = "moving to spec " + t.upgrade.Engine
		}
		if errors.As(e.err, new(*tracer.CheckError)) {
			// Not attached again: its build is not the one the offsets fit.
			d.failed[t.id] = true
			d.totals.Rejected[reasonBadOffsets]++
		}
		var dropped, shed uint64
		for _, e := range t.progress.Export {
			dropped, shed = dropped+e.Dropped, shed+e.Shed
		}
		d.log.printf("detached from PID %d (%s): %s; %d events, %d dropped; %d spans dropped, %d of them for the memory limit",
			t.id.PID, t.exe, reason, t.progress.Events, t.progress.Drops, dropped, shed)
		defer d.notify(Event{Kind: "detached", PID: t.id.PID, Engine: t.engine, Reason: reason, Result: e.res})
	case alive && !t.exec && d.ctx.Err() == nil && time.Since(t.seen) < 10*time.Second && !errors.Is(e.err, context.Canceled) &&
		!errors.Is(e.err, errPanic) && reasonOf(e.err, d.ctx) == "":
		now := time.Now()
		d.cands[t.id.PID] = &candidate{id: t.id, uid: t.owner.UID, seen: t.seen, boot: t.boot,
			next: now.Add(min(2*time.Second, 100*time.Millisecond<<t.tries)), tries: t.tries}
	case alive && !t.exec && d.ctx.Err() == nil:
		d.totals.AttachFailures++
		reason := reasonAttach
		if r := reasonOf(e.err, d.ctx); r != "" {
			reason = r // a forged file or a swapped path found while resolving
		} else if errors.Is(e.err, errPanic) {
			reason = reasonPanic
		}
		d.totals.Rejected[reason]++
		d.failed[t.id] = true
		d.log.printf("could not attach to PID %d (%s, %s): %v", t.id.PID, t.exe, t.engine, e.err)
		defer d.notify(Event{Kind: "failed", PID: t.id.PID, Engine: t.engine, Reason: fmt.Sprint(e.err)})
	}
	d.mu.Unlock()
	if (t.exec || t.upgrade != nil) && alive {
		d.consider(t.id.PID, ktime.BootNow())
	}
}

// stopAll detaches from every target and waits for the sessions to end.
func (d *Daemon) stopAll() {
	d.mu.Lock()
	n := len(d.targets)
	for _, t := range d.targets {
		t.cancel()
	}
	for _, c := range d.cands {
		if !c.busy {
			c.close()
		}
	}
	d.cands = map[int]*candidate{}
	looking := d.working
	d.mu.Unlock()
	// The workers' reads end with d.ctx, which the caller has cancelled.
	for ; looking > 0; looking-- {
		(<-d.looks).c.close()
	}
	for ; n > 0; n-- {
		d.finish(<-d.done)
	}
}

// sharedExporter lets every session's queue use one exporter: calls are
// serialised and a session's shutdown leaves it open. A call waiting its
// turn gives up when its context ends: behind a stalled collector each
// call holds the turn for the OTLP timeout, and a session that is ending
// must not wait for every other session's.
type sharedExporter struct {
	turn chan struct{} // holds one token while a call exports
	export.Exporter
}

func (s sharedExporter) Export(ctx context.Context, spans []*spanrec.Span) error {
	select {
	case s.turn <- struct{}{}:
		defer func() { <-s.turn }()
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Exporter.Export(ctx, spans)
}

func (sharedExporter) Shutdown(context.Context) error { return nil }

// prefixLog puts a session's messages on the daemon's log, a line at a time.
type prefixLog struct {
	l      *lineLog
	prefix string
}

func (p *prefixLog) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		p.l.printf("%s%s", p.prefix, strings.TrimPrefix(line, "specprobe: "))
	}
	return len(b), nil
}
