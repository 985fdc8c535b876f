package daemon

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/specprobe/specprobe/discover"
	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/safefile"
	"github.com/specprobe/specprobe/k8smeta"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/tracer"
)

// Every look at a process runs on a worker, off the main loop, within a
// deadline and a budget of reads of its memory, with panics recovered: a
// process whose files or memory were built to make the daemon work without
// end costs one worker for examineTimeout, is counted with its reason and
// looked at again only after a backoff. Workers are handed out in turns
// by user, and one user holds at most perUIDWorkers of them, so that one
// user's processes cannot delay the look at another's.
const (
	examineWorkers = 4
	perUIDWorkers  = 2
	examineTimeout = 2 * time.Second
	// A look at a Python process reads a few hundred small objects.
	examineReads = 50_000
	examineBytes = 32 << 20
)

// Reasons a process is not traced, the reason label of
// specprobe_daemon_rejected_total.
const (
	reasonDeadline     = "deadline"           // the look took past examineTimeout
	reasonBudget       = "read_budget"        // it read more of the process's memory than allowed
	reasonDictTooLarge = "dict_too_large"     // a lookup would have to scan a huge dict
	reasonPanic        = "panic"              // looking at it crashed a worker (recovered)
	reasonBadELF       = "bad_elf"            // its interpreter file is not a well-formed ELF file
	reasonMappings     = "too_many_mappings"  // it maps more files than any server
	reasonUnsupported  = "unsupported_python" // free-threaded or too old
	reasonExecLoop     = "exec_loop"          // it execs again and again
	reasonNotSelected  = "not_selected"       // the select keys leave it out
	reasonMaxProcesses = "max_processes"      // every slot is taken (it waits)
	reasonMaxPerUID    = "max_per_uid"        // its user has its share (it waits)
	reasonMaxPerPod    = "max_per_pod"        // its pod has its share (it waits)
	reasonAttach       = "attach_failed"      // matched, but the attach failed
	reasonCorrupt      = "corrupt_memory"     // its interpreter state loops (a list that does not end)
	reasonPathSwapped  = "path_swapped"       // a file it maps is reached through a symlink put there since
	reasonExecRate     = "exec_rate"          // its user execs faster than execRate: left to the rescan
	reasonSpecMismatch = "spec_mismatch"      // the spec names an argument its function lacks (another version of the engine)
	reasonOtherRank    = "other_rank"         // not the rank or process its spec traces from: another process of its group or server makes the same spans
	reasonBadOffsets   = "wrong_offsets"      // attached, then a value read through its spec's offsets failed its check (another build)
)

var errExecLoop = errors.New("more than 20 execs in 10s")

// hostile tells whether a look's error says the process is built to make
// reading it expensive, rather than not ready yet.
func hostile(err error) bool {
	return errors.Is(err, pyproc.ErrBudget) || errors.Is(err, pyproc.ErrScanTooLarge) || errors.Is(err, pyproc.ErrCorrupt) ||
		errors.Is(err, elfsym.ErrInvalid) || errors.Is(err, elfsym.ErrBudget) || errors.Is(err, safefile.ErrSymlink)
}

func reasonOf(err error, ctx context.Context) string {
	switch {
	case err == nil:
		return ""
	case ctx.Err() != nil && errors.Is(err, pyproc.ErrBudget):
		return reasonDeadline
	case errors.Is(err, pyproc.ErrBudget), errors.Is(err, elfsym.ErrBudget):
		return reasonBudget
	case errors.Is(err, pyproc.ErrScanTooLarge):
		return reasonDictTooLarge
	case errors.Is(err, elfsym.ErrInvalid):
		return reasonBadELF
	case errors.Is(err, loader.ErrTooManyMappings):
		return reasonMappings
	case errors.Is(err, pyproc.ErrUnsupported):
		return reasonUnsupported
	case errors.Is(err, pyproc.ErrCorrupt):
		return reasonCorrupt
	case errors.Is(err, safefile.ErrSymlink):
		return reasonPathSwapped
	case errors.As(err, new(*probes.OtherRankError)), errors.As(err, new(*tracer.ServerProcessError)):
		return reasonOtherRank
	case errors.As(err, new(*loader.MissingNameError)):
		// Not tried again: the process runs code the spec was not written for.
		return reasonSpecMismatch
	}
	return ""
}

// history is what the daemon remembers of a process between candidates.
type history struct {
	until   time.Time // rejected: not looked at before
	strikes int       // rejections so far, for the backoff
	execs   int       // execs since window
	window  time.Time
	logged  map[string]bool
}

// execLoop counts an exec; true when the process execs too often to be a
// server starting.
func (h *history) execLoop(now time.Time) bool {
	if now.Sub(h.window) > 10*time.Second {
		h.execs, h.window = 0, now
	}
	h.execs++
	return h.execs > 20
}

// rejectBackoff grows with each rejection: 5s, 10s, 20s ... 5 minutes.
func rejectBackoff(strikes int) time.Duration {
	return min(5*time.Second<<min(strikes-1, 6), 5*time.Minute)
}

// look is what a worker found.
type look struct {
	c      *candidate
	spec   *probes.Spec
	again  bool
	reason string
	err    error
	owner  Owner
	meta   *k8smeta.Info
}

// dispatchLocked hands due candidates to free workers, in turns by user
// (one candidate per user a round); only, when given, those. d.mu is held.
func (d *Daemon) dispatchLocked(now time.Time, only ...*candidate) {
	if d.ctx == nil || d.ctx.Err() != nil || d.working >= examineWorkers {
		return
	}
	due := only
	if len(due) == 0 {
		for _, c := range d.cands {
			due = append(due, c)
		}
		slices.SortFunc(due, func(a, b *candidate) int { return a.next.Compare(b.next) })
	}
	byUID := map[int][]*candidate{}
	var uids []int
	for _, c := range due {
		if c.busy || now.Before(c.next) || d.cands[c.id.PID] != c {
			continue
		}
		if _, ok := byUID[c.uid]; !ok {
			uids = append(uids, c.uid)
		}
		byUID[c.uid] = append(byUID[c.uid], c)
	}
	for progress := true; progress && d.working < examineWorkers; {
		progress = false
		for _, uid := range uids {
			if d.working >= examineWorkers {
				break
			}
			if len(byUID[uid]) == 0 || d.busyUID[uid] >= perUIDWorkers {
				continue
			}
			c := byUID[uid][0]
			byUID[uid] = byUID[uid][1:]
			c.busy = true
			d.working++
			d.busyUID[uid]++
			progress = true
			go func() { d.looks <- d.examine(c) }()
		}
	}
}

// examine looks at one candidate on a worker.
func (d *Daemon) examine(c *candidate) (l look) {
	l.c = c
	defer func() {
		if r := recover(); r != nil {
			l = look{c: c, reason: reasonPanic, err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	ctx, cancel := context.WithTimeout(d.ctx, examineTimeout)
	defer cancel()
	if c.budget == nil {
		c.budget = pyproc.NewBudget(examineReads, examineBytes)
	}
	c.budget.Reset(ctx)
	l.spec, l.again, l.err = d.classify(ctx, c)
	if l.reason = reasonOf(l.err, ctx); l.reason == "" && ctx.Err() != nil && l.spec == nil && d.ctx.Err() == nil {
		l.reason, l.err, l.again = reasonDeadline, fmt.Errorf("looking at it took more than %s", examineTimeout), false
	}
	if l.spec == nil {
		return l
	}
	l.owner = owner(c)
	if sel := d.opts.Select; sel.needsPod() && d.opts.Meta != nil {
		info := d.lookupMeta(c.id.PID)
		l.meta = &info
		l.owner.Namespace, l.owner.Pod = info.Namespace, info.PodName
	}
	if why := d.opts.Select.allows(l.owner); why != "" {
		l.spec, l.reason, l.err = nil, reasonNotSelected, errors.New(why)
	}
	return l
}

func owner(c *candidate) Owner {
	o := Owner{UID: c.uid}
	if data, err := procfs.Cgroup(c.id.PID); err == nil {
		o.Cgroup = cgroupPath(data)
		_, _, o.PodUID = k8smeta.ParseCgroup(data)
	}
	return o
}

func (d *Daemon) lookupMeta(pid int) k8smeta.Info {
	ctx, cancel := context.WithTimeout(d.ctx, metaTimeout)
	defer cancel()
	return d.opts.Meta(ctx, pid)
}

// metaTimeout bounds a pod metadata lookup (the kubelet's /pods).
const metaTimeout = 5 * time.Second

// decide acts on a look, on the main loop.
func (d *Daemon) decide(l look, now time.Time) {
	c := l.c
	d.mu.Lock()
	defer d.mu.Unlock()
	c.busy = false
	d.working--
	d.busyUID[c.uid]--
	if d.cands[c.id.PID] != c || d.ctx.Err() != nil {
		c.close() // dropped while the worker looked: the PID exited or exec'd
		return
	}
	switch {
	case l.reason == reasonNotSelected || l.reason == reasonOtherRank:
		d.countLocked(c.id, l.reason, l.err, c.id.PID)
		delete(d.cands, c.id.PID)
		c.close()
		d.ignored[c.id] = true
	case l.reason != "":
		// Looked at afresh (the interpreter attached again) when the
		// backoff ends.
		c.close()
		c.next = d.rejectLocked(c.id, c.id.PID, l.reason, l.err, now)
	case l.spec != nil:
		if why := d.opts.Config.capHit(d.tracedOwners(), l.owner); why != "" {
			if c.held != why {
				c.held = why
				d.countLocked(c.id, why, nil, c.id.PID)
				if why == reasonMaxProcesses {
					d.totals.SkippedAtLimit++
				}
				d.log.printf("PID %d (%s) matches %s but %s is reached: it is attached when a slot frees", c.id.PID, loader.Label(c.id.PID), l.spec.Engine, why)
			}
			c.next = now.Add(time.Second)
			return
		}
		delete(d.cands, c.id.PID)
		c.close()
		d.start(c, l.spec, l.owner, l.meta)
	case l.again:
		c.next = now.Add(backoff(now.Sub(c.seen)))
	default:
		delete(d.cands, c.id.PID)
		c.close()
		if _, err := discover.Identify(c.id.PID); err == nil {
			d.ignored[c.id] = true
		}
	}
}

// rejectLocked counts a rejection and keeps the process out until its
// backoff ends, which it returns. d.mu is held.
func (d *Daemon) rejectLocked(id discover.ID, pid int, reason string, err error, now time.Time) time.Time {
	h := d.historyOf(id)
	h.strikes++
	wait := rejectBackoff(h.strikes)
	h.until = now.Add(wait)
	d.countLocked(id, reason, fmt.Errorf("%w; looked at again in %s", err, wait), pid)
	return h.until
}

// countLocked counts a reason and logs it once per process.
func (d *Daemon) countLocked(id discover.ID, reason string, err error, pid int) {
	d.totals.Rejected[reason]++
	h := d.historyOf(id)
	if h.logged[reason] {
		return
	}
	h.logged[reason] = true
	if err != nil {
		d.log.printf("PID %d (%s) not traced (%s): %v", pid, loader.Label(pid), reason, err)
	}
}

func (d *Daemon) historyOf(id discover.ID) *history {
	h := d.history[id]
	if h == nil {
		h = &history{logged: map[string]bool{}}
		d.history[id] = h
	}
	return h
}

// tracedOwners are the owners of the sessions running. d.mu is held.
func (d *Daemon) tracedOwners() []Owner {
	out := make([]Owner, 0, len(d.targets))
	for _, t := range d.targets {
		out = append(out, t.owner)
	}
	return out
}
