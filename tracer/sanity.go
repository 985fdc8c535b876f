package tracer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
)

// A native stage reads its ids through struct offsets; on a build whose
// struct moved, a wrong offset reads some other field, and the ids it makes
// are wrong without a sign. The values a spec gives a check are checked on
// every call, before the builder sees it: the first that fails ends the
// trace with an error naming the value, its offsets and what was read.

// valueChecks holds each native site's checks and what the request ids
// were seen doing so far.
type valueChecks struct {
	passed int // calls checked that passed
	sites  map[int]*siteChecks
	// Per site and slot (the increasing_per value): the last request id,
	// and each request id's slot.
	last   map[[2]int64]int64
	slotOf map[[2]int64]int64
}

type siteChecks struct {
	stage  *probes.Stage
	layout *loader.Layout
	// below: each value's bound read from the process, and where.
	below     map[string]int64
	belowFrom map[string]string
}

// newValueChecks prepares the checks of targets' values; nil when none has
// one. cmdline and getenv are the process's (a bound's count).
func newValueChecks(targets []loader.Target, cmdline []string, getenv func(string) string) *valueChecks {
	c := &valueChecks{sites: map[int]*siteChecks{}, last: map[[2]int64]int64{}, slotOf: map[[2]int64]int64{}}
	for i, t := range targets {
		sc := &siteChecks{stage: t.Stage, layout: t.Layout, below: map[string]int64{}, belowFrom: map[string]string{}}
		any := false
		for _, nv := range append(t.Stage.Boundaries()[0], t.Stage.Boundaries()[1]...) {
			ch := nv.Value.Check
			if ch == nil {
				continue
			}
			any = true
			if b := ch.Below; b != nil {
				var env []string
				if b.Env != "" {
					env = []string{getenv(b.Env)}
				}
				sc.below[nv.Name], sc.belowFrom[nv.Name] = b.Count(cmdline, env)
			}
		}
		if any {
			c.sites[i] = sc
		}
	}
	if len(c.sites) == 0 {
		return nil
	}
	return c
}

// processValueChecks is newValueChecks for a live process.
func processValueChecks(pid int, targets []loader.Target) *valueChecks {
	cmdline, _ := procfs.Cmdline(pid)
	return newValueChecks(targets, cmdline, func(name string) string { return procfs.Getenv(pid, name) })
}

// check returns why ev's values cannot be believed; nil when they pass.
func (c *valueChecks) check(ev *spanbuilder.Event) error {
	if c == nil {
		return nil
	}
	sc := c.sites[ev.Site]
	if sc == nil {
		return nil
	}
	b := probes.Entry
	if ev.Exit {
		b = probes.Exit
	}
	vals := map[string]int64{}
	for _, v := range ev.Values[:ev.NValues] {
		vals[v.Name] = v.V
	}
	defer func() { c.passed++ }()
	// Bounds first, for every value: a wrong slot makes the request id's
	// check say the wrong thing.
	for pass := 0; pass < 2; pass++ {
		for _, nv := range sc.stage.Boundaries()[b] {
			ch := nv.Value.Check
			if ch == nil {
				continue
			}
			x, ok := vals[nv.Name]
			what := nv.Name
			if nv.Name == "" {
				what = "request_id"
				var err error
				x, err = strconv.ParseInt(ev.RequestID, 10, 64)
				ok = err == nil
			}
			if !ok {
				continue // not read: counted as a failed read, not a wrong one
			}
			var bad string
			switch {
			case pass == 1:
				if ch.IncreasingPer != "" {
					bad = c.increasing(ev.Site, x, ch.IncreasingPer, vals)
				}
			case ch.Min != nil && x < *ch.Min:
				bad = fmt.Sprintf("below %d", *ch.Min)
			case ch.Below != nil && x >= sc.below[nv.Name]:
				bad = fmt.Sprintf("not below %d (%s)", sc.below[nv.Name], sc.belowFrom[nv.Name])
			}
			if bad != "" {
				return sc.refuse(what, nv.Value, x, bad)
			}
		}
	}
	return nil
}

// increasing checks a request id against those seen before per value of
// the other (the slot): a slot's tasks come one after another, each with a
// larger id, and a task runs on one slot.
func (c *valueChecks) increasing(site int, id int64, per string, vals map[string]int64) string {
	slot, ok := vals[per]
	if !ok {
		return ""
	}
	key := [2]int64{int64(site), slot}
	if last, seen := c.last[key]; seen && id < last {
		return fmt.Sprintf("less than the %d read before on %s %d: ids go back", last, per, slot)
	}
	idKey := [2]int64{int64(site), id}
	if other, seen := c.slotOf[idKey]; seen && other != slot {
		return fmt.Sprintf("read on %s %d and before on %s %d: one request on two", per, slot, per, other)
	}
	c.last[key], c.slotOf[idKey] = id, slot
	return ""
}

// Some wrong offsets read values that pass alone: a constant 0 is a fine
// first task id, until a second slot reads it too. So the first events are
// held back, not handed on, until probationCalls checked calls passed or
// probationTime went by; a refusal in that time drops them all, and no span
// with a wrong id is made. Spans keep the calls' own times: holding them
// delays their export, not their timing.
const (
	probationCalls = 16
	probationTime  = 2 * time.Second
	maxHeld        = 1 << 16 // events held at most (then handed on)
)

// refusal is a session's first failed check: one for all its processes.
type refusal struct {
	err error
	ch  chan struct{} // closed at the refusal
}

func newRefusal() *refusal { return &refusal{ch: make(chan struct{})} }

func (r *refusal) refuse(err error) {
	if r.err == nil {
		r.err = err
		close(r.ch)
	}
}

// checkedAdd hands a process's events to add once checks believe them;
// hold false hands each on as soon as it passed.
type checkedAdd struct {
	checks *valueChecks
	add    func(*spanbuilder.Event)
	r      *refusal
	hold   bool
	held   []spanbuilder.Event
	since  time.Time // the first event held
}

func newCheckedAdd(checks *valueChecks, add func(*spanbuilder.Event), r *refusal, hold bool) *checkedAdd {
	return &checkedAdd{checks: checks, add: add, r: r, hold: hold}
}

func (c *checkedAdd) event(ev *spanbuilder.Event) {
	if c.r.err != nil {
		return
	}
	if err := c.checks.check(ev); err != nil {
		c.held = nil
		c.r.refuse(err)
		return
	}
	if c.hold && c.checks != nil && c.checks.passed < probationCalls && len(c.held) < maxHeld && (c.since.IsZero() || time.Since(c.since) < probationTime) {
		if c.since.IsZero() {
			c.since = time.Now()
		}
		c.held = append(c.held, *ev)
		return
	}
	c.release()
	c.add(ev)
}

// tick hands on what is held once probationTime is over (a spec whose
// checked stage is seldom called); end hands on the rest.
func (c *checkedAdd) tick(now time.Time) {
	if len(c.held) > 0 && now.Sub(c.since) >= probationTime {
		c.release()
	}
}

func (c *checkedAdd) release() {
	if c.r.err != nil {
		c.held = nil
	}
	for i := range c.held {
		c.add(&c.held[i])
	}
	c.held = nil
}

// fieldsOf lists the fields v's derefs name.
func fieldsOf(v *probes.Value) []string {
	var out []string
	for _, e := range v.DerefExpr {
		if e != nil {
			for _, t := range e.Terms {
				out = append(out, t.Field)
			}
		}
	}
	return out
}

// CheckError is a value that failed its check: the trace stops there.
type CheckError struct{ Msg string }

func (e *CheckError) Error() string { return e.Msg }

func (sc *siteChecks) refuse(what string, v *probes.Value, x int64, bad string) error {
	origin := v.Origin
	if origin == "" {
		origin = fmt.Sprintf("deref %v", v.Deref)
	}
	msg := fmt.Sprintf("stage %s: %s read %d, %s, at %s from %s (%s): the offsets do not fit this build; "+
		"tracing stopped rather than export wrong ids", sc.stage.Name, what, x, bad, v.At, v.From, origin)
	if sc.layout != nil {
		msg += "; offsets: " + strings.Join(sc.layout.Describe(fieldsOf(v)...), "; ")
	}
	return &CheckError{Msg: msg}
}
