package loader

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/perfbp"
	"github.com/specprobe/specprobe/internal/procfs"
)

// Watch is one code object watched on every thread of a process.
type Watch struct {
	Addr  uint64
	Site  uint32
	fds   []int
	links []link.Link
}

// Wake says at which hits of a watch the reader is woken at once, because
// it reads the target's memory then; other hits reach it at the next
// threshold or timer, which costs the target less (docs/design.md, "Transport and time": a ring-buffer
// wakeup costs more than the probe).
type Wake uint32

const (
	WakeEntry Wake = 1 // reads while the call runs
	WakeExit  Wake = 2 // reads from the caller as the call returns
)

// ArmWatch puts a hardware write watchpoint on the 8 bytes at addr (a code
// object's reference count) in every thread of pid, each running the
// watch_hit program. inherit=1 with inherit_thread covers the threads those
// threads create later, and no process they fork: a child is not the target.
// refcnt is the count read just before arming, the base for telling the first hit.
func (s *Session) ArmWatch(addr uint64, site uint32, refcnt uint64, wake Wake) (*Watch, error) {
	if addr%8 != 0 {
		return nil, fmt.Errorf("watch address %#x is not 8-byte aligned", addr)
	}
	w0 := bpf.StageWatch{Site: site, Wake: uint32(wake), Last: int64(refcnt), Tgid: uint32(s.PID)}
	if err := s.objs.Watches.Put(addr, &w0); err != nil {
		return nil, fmt.Errorf("registering watch %#x: %w", addr, err)
	}
	s.hits.watch(site, addr, refcnt)
	w := &Watch{Addr: addr, Site: site}
	tids, err := procfs.Tasks(s.PID)
	if err != nil {
		s.DisarmWatch(w)
		return nil, err
	}
	for _, tid := range tids {
		fd, err := perfbp.OpenWrite(tid, addr)
		if errors.Is(err, unix.ESRCH) {
			continue // the thread ended meanwhile
		}
		if err != nil {
			s.DisarmWatch(w)
			if errors.Is(err, unix.ENOSPC) {
				return nil, fmt.Errorf("no free debug register on thread %d of PID %d: x86 has 4 per thread, and %s holds them all", tid, s.PID, registerHolder(s.PID, tid))
			}
			return nil, fmt.Errorf("watchpoint on thread %d: %w", tid, err)
		}
		w.fds = append(w.fds, fd)
		l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: s.objs.WatchHit, Attach: ebpf.AttachPerfEvent})
		if err != nil {
			s.DisarmWatch(w)
			return nil, fmt.Errorf("attaching the watchpoint program on thread %d: %w", tid, err)
		}
		w.links = append(w.links, l)
	}
	s.watches = append(s.watches, w)
	return w, nil
}

// registerHolder names what likely holds a thread's debug registers.
func registerHolder(pid, tid int) string {
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
			if tracer := strings.TrimSpace(v); tracer != "0" {
				comm, _ := os.ReadFile("/proc/" + tracer + "/comm")
				return fmt.Sprintf("the debugger tracing it (PID %s, %s)", tracer, strings.TrimSpace(string(comm)))
			}
		}
	}
	return "something (more than 4 watched stages, another tracer, or a debugger that has detached: the kernel keeps a debugger's breakpoints until the thread exits)"
}

// DisarmWatch removes a watchpoint from every thread; safe on a partial watch.
func (s *Session) DisarmWatch(w *Watch) {
	for _, l := range w.links {
		l.Close()
	}
	for _, fd := range w.fds {
		unix.Close(fd)
	}
	w.links, w.fds = nil, nil
	_ = s.objs.Watches.Delete(w.Addr)
}
