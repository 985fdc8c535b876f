package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/specprobe/specprobe/discover"
	"github.com/specprobe/specprobe/internal/ktime"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/tracer"
)

// A candidate is a process that matches no spec yet but may: a Python
// interpreter that has not imported an engine's module (engines import their
// workers after loading the model), or a process just exec'd whose libraries
// are not mapped yet.
type candidate struct {
	id    discover.ID
	uid   int       // real uid, for fair turns at the workers
	seen  time.Time // exec or first scan
	boot  uint64    // the same, CLOCK_BOOTTIME ns
	next  time.Time // when to look again
	tries int
	// busy: a worker is looking at it; py and budget are the worker's then.
	busy   bool
	py     *pyproc.Process
	budget *pyproc.Budget
	held   string // the cap that held it back, logged and counted once
}

// How long a process that is not Python is looked at after its exec: the
// dynamic loader maps its libraries within milliseconds.
const nativeGrace = 3 * time.Second

// consider looks at pid now: after its exec at execAt (CLOCK_BOOTTIME ns),
// or in a scan (execAt 0). An exec older than the last look at the process
// is ignored: that look already saw the new program. It runs on the main
// loop and reads two small /proc files; the looking itself is a worker's.
func (d *Daemon) consider(pid int, execAt uint64) {
	if pid == os.Getpid() {
		return
	}
	d.mu.Lock()
	if t, ok := d.targets[pid]; ok {
		if execAt > t.boot && !t.exec {
			// The traced program was replaced: its probes point at an image
			// that is gone. Detach; the new program is examined when the
			// session has ended.
			t.exec = true
			d.log.printf("PID %d exec'd %s: detaching", pid, loader.Label(pid))
			t.cancel()
		}
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	id, err := discover.Identify(pid)
	if err != nil {
		return // gone already
	}
	st, err := procfs.ReadStatus(pid)
	if err != nil {
		return
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	exec := execAt > 0
	if exec && !d.execTokens(execKey{st.UID, cgroupOf(pid)}, now) {
		// A user or container exec'ing faster than any server starts: its
		// processes are left to the next rescan, and the loop stays free
		// for the others.
		d.totals.Rejected[reasonExecRate]++
		return
	}
	c := d.cands[pid]
	if exec && c != nil && c.id == id && execAt < c.boot {
		exec = false // seen already
	}
	h := d.history[id]
	if exec {
		h = d.historyOf(id)
	}
	if exec && h.execLoop(now) {
		d.rejectLocked(id, pid, reasonExecLoop, errExecLoop, now)
		if c != nil {
			d.drop(c)
		}
		return
	}
	if h != nil && now.Before(h.until) {
		return // rejected: looked at again when the backoff ends
	}
	if c != nil && (c.id != id || exec) {
		d.drop(c) // PID reused, or a new program in the same process
		c = nil
	}
	if exec {
		delete(d.failed, id)
		delete(d.ignored, id)
	}
	if c != nil || d.failed[id] || d.ignored[id] {
		return
	}
	c = &candidate{id: id, uid: st.UID, seen: now, boot: ktime.BootNow(), next: now}
	d.cands[pid] = c
	d.totals.Discovered++
	d.dispatchLocked(now, c)
}

// execRate and execBurst bound the execs of one user in one cgroup (a
// container) that the daemon looks at as they happen, per second and at
// once.
const (
	execRate  = 100
	execBurst = 200
)

// execKey is whose execs share a bucket.
type execKey struct {
	uid    int
	cgroup string
}

func cgroupOf(pid int) string {
	data, _ := procfs.Cgroup(pid)
	return cgroupPath(data)
}

// execTokens takes a token from k's bucket; false when it is empty.
// d.mu is held.
func (d *Daemon) execTokens(k execKey, now time.Time) bool {
	b := d.execBuckets[k]
	if b == nil {
		if len(d.execBuckets) > 4096 {
			clear(d.execBuckets) // many cgroups come and go: forget the full ones' state
		}
		b = &bucket{tokens: execBurst, last: now}
		d.execBuckets[k] = b
	}
	b.tokens = min(execBurst, b.tokens+now.Sub(b.last).Seconds()*execRate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

type bucket struct {
	tokens float64
	last   time.Time
}

// drop forgets a candidate; one a worker holds is closed when it returns.
func (d *Daemon) drop(c *candidate) {
	if d.cands[c.id.PID] == c {
		delete(d.cands, c.id.PID)
	}
	if !c.busy {
		c.close()
	}
}

// backoff: often right after the exec, when a server is being set up, then
// every two seconds while a Python process may still import an engine.
func backoff(age time.Duration) time.Duration {
	switch {
	case age < time.Second:
		return 50 * time.Millisecond
	case age < 5*time.Second:
		return 250 * time.Millisecond
	default:
		return 2 * time.Second
	}
}

// classify returns the spec the process matches, or whether it may match
// later. It runs on a worker, every read of the target's memory counted
// against c.budget; an error says why the process is rejected.
func (d *Daemon) classify(ctx context.Context, c *candidate) (*probes.Spec, bool, error) {
	pid := c.id.PID
	if id, err := discover.Identify(pid); err != nil || id != c.id {
		return nil, false, nil
	}
	proc, err := loader.ProcessRecord(pid)
	if proc.Exe == "" {
		return nil, false, nil // a kernel thread, or gone
	}
	if errors.Is(err, loader.ErrTooManyMappings) {
		return nil, false, err
	}
	proc.RequireModule = true
	python := d.pythonSpecs && looksPython(proc.Exe, proc.Mapped)
	var pyErr error
	if python {
		proc.HasModule = func(m string) bool {
			if c.py == nil && pyErr == nil {
				c.py, pyErr = pyproc.AttachWith(pid, c.budget.Wrap)
			}
			if c.py == nil || ctx.Err() != nil {
				return false
			}
			ok, err := c.py.HasModule(m)
			if hostile(err) && pyErr == nil {
				pyErr = err
			}
			return ok
		}
	}
	s, err := probes.Detect(d.opts.Specs, proc)
	switch {
	case err != nil:
		return nil, false, err // another rank of its group is traced
	case s != nil:
		// Its server may be traced from another of its processes.
		if err := tracer.CheckLead(s, pid); err != nil {
			return nil, false, err
		}
		return s, false, nil
	}
	switch {
	case !python:
		return nil, time.Since(c.seen) < nativeGrace, nil
	case hostile(pyErr) || errors.Is(pyErr, pyproc.ErrUnsupported):
		return nil, false, pyErr
	}
	return nil, true, nil // the interpreter is still starting, or the engine not imported yet
}

func looksPython(exe string, mapped []string) bool {
	if strings.HasPrefix(exe, "python") {
		return true
	}
	for _, m := range mapped {
		if strings.HasPrefix(filepath.Base(m), "libpython3") {
			return true
		}
	}
	return false
}

func (c *candidate) close() {
	if c.py != nil {
		c.py.Close()
		c.py = nil
	}
}
