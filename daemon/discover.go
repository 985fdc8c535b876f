package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/specprobe/specprobe/discover"
	"github.com/specprobe/specprobe/internal/ktime"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
)

// A candidate is a process that matches no spec yet but may: a Python
// interpreter that has not imported an engine's module (engines import their
// workers after loading the model), or a process just exec'd whose libraries
// are not mapped yet.
type candidate struct {
	id    discover.ID
	seen  time.Time // exec or first scan
	boot  uint64    // the same, CLOCK_BOOTTIME ns
	next  time.Time // when to look again
	tries int
	py    *pyproc.Process
	full  bool // matched while max_processes were traced (logged once)
}

// How long a process that is not Python is looked at after its exec: the
// dynamic loader maps its libraries within milliseconds.
const nativeGrace = 3 * time.Second

// consider looks at pid now: after its exec at execAt (CLOCK_BOOTTIME ns),
// or in a scan (execAt 0). An exec older than the last look at the process
// is ignored: that look already saw the new program.
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
			d.log.printf("PID %d exec'd %s: detaching", pid, loader.Exe(pid))
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
	d.mu.Lock()
	exec := execAt > 0
	c := d.cands[pid]
	if exec && c != nil && c.id == id && execAt < c.boot {
		exec = false // seen already
	}
	if c != nil && (c.id != id || exec) {
		c.close() // PID reused, or a new program in the same process
		c = nil
	}
	if exec {
		delete(d.failed, id)
		delete(d.ignored, id)
	}
	skip := c != nil || d.failed[id] || d.ignored[id]
	if !skip {
		now := time.Now()
		c = &candidate{id: id, seen: now, boot: ktime.BootNow(), next: now}
		d.cands[pid] = c
		d.totals.Discovered++
	}
	d.mu.Unlock()
	if !skip {
		d.examine(c, time.Now())
	}
}

// recheck looks again at the candidates that are due.
func (d *Daemon) recheck(now time.Time) {
	d.mu.Lock()
	var due []*candidate
	for _, c := range d.cands {
		if !now.Before(c.next) {
			due = append(due, c)
		}
	}
	d.mu.Unlock()
	for _, c := range due {
		d.examine(c, now)
	}
}

func (d *Daemon) examine(c *candidate, now time.Time) {
	if d.ctx.Err() != nil {
		return // detaching everything
	}
	spec, again := d.classify(c)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case spec != nil && len(d.targets) >= d.opts.MaxProcesses:
		if !c.full {
			c.full = true
			d.totals.SkippedAtLimit++
			d.log.printf("PID %d (%s) matches %s but max_processes (%d) are traced: it is attached when one ends", c.id.PID, loader.Exe(c.id.PID), spec.Engine, d.opts.MaxProcesses)
		}
		c.next = now.Add(time.Second)
	case spec != nil:
		delete(d.cands, c.id.PID)
		c.close()
		d.start(c, spec)
	case again:
		c.next = now.Add(backoff(now.Sub(c.seen)))
	default:
		delete(d.cands, c.id.PID)
		c.close()
		if _, err := discover.Identify(c.id.PID); err == nil {
			d.ignored[c.id] = true
		}
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
// later.
func (d *Daemon) classify(c *candidate) (*probes.Spec, bool) {
	pid := c.id.PID
	if id, err := discover.Identify(pid); err != nil || id != c.id {
		return nil, false
	}
	exe := loader.Exe(pid)
	if exe == "" {
		return nil, false // a kernel thread, or gone
	}
	cmdline := loader.Cmdline(pid)
	var mapped []string
	if maps, err := loader.Mappings(pid); err == nil {
		for _, m := range maps {
			mapped = append(mapped, m.Path)
		}
	}
	wantsModule := false
	for _, s := range d.opts.Specs {
		if isPython(s) {
			wantsModule = true
		} else if s.Matches(exe, cmdline, mapped) {
			return s, false
		}
	}
	if !wantsModule || !looksPython(exe, mapped) {
		return nil, time.Since(c.seen) < nativeGrace
	}
	if c.py == nil {
		py, err := pyproc.Attach(pid)
		if errors.Is(err, pyproc.ErrUnsupported) {
			d.log.printf("PID %d (%s) not traced: %v", pid, exe, err)
			return nil, false
		}
		if err != nil {
			return nil, true // the interpreter is still starting
		}
		c.py = py
	}
	for _, s := range probes.ByPriority(d.opts.Specs) {
		if !isPython(s) {
			continue
		}
		for _, m := range engineModules(s) {
			if ok, _ := c.py.HasModule(m); ok {
				return s, false
			}
		}
	}
	return nil, true
}

// A Python spec is attached once the process has imported the module that
// says the engine runs there (match.module, else a stage's module): a
// command line alone also matches an engine's parent process, which runs
// no stage.
func engineModules(s *probes.Spec) []string {
	if len(s.Match.Module) > 0 {
		return s.Match.Module
	}
	var out []string
	for _, st := range s.Stages {
		if st.IsPython() {
			out = append(out, st.Module)
		}
	}
	return out
}

func isPython(s *probes.Spec) bool {
	for _, st := range s.Stages {
		if st.IsPython() {
			return true
		}
	}
	return false
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
