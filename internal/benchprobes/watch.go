package benchprobes

import (
	"errors"
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/perfbp"
)

// ArmBareWatch puts the same hardware write watchpoint ArmWatch does (8 bytes
// at addr, every thread of pid, inherited) but runs an empty program on it:
// the baseline `make bench` measures specprobe's watched calls against.
func ArmBareWatch(pid int, addr uint64) (io.Closer, error) {
	if addr%8 != 0 {
		return nil, fmt.Errorf("watch address %#x is not 8-byte aligned", addr)
	}
	objs, err := Load()
	if err != nil {
		return nil, err
	}
	w := &bareWatch{objs: objs}
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("listing the threads of PID %d: %w", pid, err)
	}
	for _, th := range threads {
		tid := th.PID
		fd, err := perfbp.OpenWrite(tid, addr)
		if errors.Is(err, unix.ESRCH) {
			continue // the thread ended meanwhile
		}
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("watchpoint on thread %d: %w", tid, err)
		}
		w.fds = append(w.fds, fd)
		l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: objs.WatchBare, Attach: ebpf.AttachPerfEvent})
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("attaching the empty watchpoint program on thread %d: %w", tid, err)
		}
		w.links = append(w.links, l)
	}
	return w, nil
}

type bareWatch struct {
	objs  bpf.StageObjects
	fds   []int
	links []link.Link
}

func (w *bareWatch) Close() error {
	var errs []error
	for _, l := range w.links {
		errs = append(errs, l.Close())
	}
	for _, fd := range w.fds {
		errs = append(errs, unix.Close(fd))
	}
	w.links, w.fds = nil, nil
	return errors.Join(append(errs, w.objs.Close())...)
}
