package loader

import (
	"errors"
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/bpf"
)

// ArmBareWatch puts the same hardware write watchpoint ArmWatch does (8 bytes
// at addr, every thread of pid, inherited) but runs an empty program on it:
// the baseline `make bench` measures specprobe's watched calls against.
func ArmBareWatch(pid int, addr uint64) (io.Closer, error) {
	if addr%8 != 0 {
		return nil, fmt.Errorf("watch address %#x is not 8-byte aligned", addr)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, err
	}
	var objs bpf.StageObjects
	if err := bpf.LoadStageObjects(&objs, nil); err != nil {
		return nil, explainLoadError(err)
	}
	w := &bareWatch{objs: objs}
	tids, err := threads(pid)
	if err != nil {
		w.Close()
		return nil, err
	}
	for _, tid := range tids {
		fd, err := openBreakpoint(tid, addr)
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
