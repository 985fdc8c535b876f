// Package discover finds processes on the node: a scan of /proc, and exec
// notification through a BPF raw tracepoint so a new process is seen within
// milliseconds of its execve.
package discover

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/bpfring"
)

// Execs reports the PIDs of processes that called execve.
type Execs struct {
	objs   bpf.ExecObjects
	link   link.Link
	reader *bpfring.Reader
	// Close closes stop, then takes reading, which Run holds while it
	// reads: the ring is unmapped only once Run is out of it.
	stop      chan struct{}
	closeOnce sync.Once
	reading   sync.Mutex
}

// initPIDNamespace is the inode of the kernel's first PID namespace
// (PROC_PID_INIT_INO), the same on every Linux.
const initPIDNamespace = 0xEFFFFFFC

// WatchExecs arms the exec tracepoint. It needs the host's PID namespace:
// the kernel reports PIDs as that namespace numbers them.
func WatchExecs() (*Execs, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &st); err != nil {
		return nil, fmt.Errorf("reading our PID namespace: %w", err)
	}
	if st.Ino != initPIDNamespace {
		return nil, fmt.Errorf("specprobe daemon runs in a PID namespace of its own (inode %d): it must see the host's processes: run it with hostPID: true in Kubernetes, --pid=host in Docker", st.Ino)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}
	spec, err := bpf.LoadExec()
	if err != nil {
		return nil, err
	}
	w := &Execs{stop: make(chan struct{})}
	if err := spec.LoadAndAssign(&w.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the exec watcher: %w", err)
	}
	w.link, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sched_process_exec", Program: w.objs.OnExec})
	if err != nil {
		w.objs.Close()
		return nil, fmt.Errorf("attaching to the sched_process_exec tracepoint: %w", err)
	}
	w.reader, err = bpfring.NewReader(w.objs.Execs)
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Exec is one execve: the PID and when it happened (CLOCK_BOOTTIME ns, the
// clock of ktime.BootNow).
type Exec struct {
	PID    int
	BootNs uint64
}

// Run sends each exec to out until Close.
func (w *Execs) Run(out chan<- Exec) error {
	w.reading.Lock()
	defer w.reading.Unlock()
	var raw []byte
	for {
		select {
		case <-w.stop:
			return nil
		default:
		}
		// A bound on each wait, so that Close is seen.
		w.reader.SetDeadline(time.Now().Add(100 * time.Millisecond))
		err := w.reader.ReadInto(&raw)
		switch {
		case err == nil && len(raw) >= 16:
			select {
			case out <- Exec{PID: int(binary.LittleEndian.Uint32(raw)), BootNs: binary.LittleEndian.Uint64(raw[8:])}:
			case <-w.stop:
				return nil
			}
		case err == nil, err == bpfring.ErrStuck, errors.Is(err, os.ErrDeadlineExceeded):
		default:
			return err
		}
	}
}

// Drops counts execs lost: to a full ring buffer, or never committed.
func (w *Execs) Drops() uint64 {
	var n uint64
	_ = w.objs.ExecDrops.Lookup(uint32(0), &n)
	if w.reader != nil {
		n += w.reader.Stuck()
	}
	return n
}

// Close detaches the tracepoint and ends Run.
func (w *Execs) Close() error {
	w.closeOnce.Do(func() { close(w.stop) })
	w.reading.Lock()
	defer w.reading.Unlock()
	var errs []error
	if w.reader != nil {
		errs = append(errs, w.reader.Close())
	}
	if w.link != nil {
		errs = append(errs, w.link.Close())
	}
	errs = append(errs, w.objs.Close())
	return errors.Join(errs...)
}

// Scan lists the PIDs /proc shows now.
func Scan() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
