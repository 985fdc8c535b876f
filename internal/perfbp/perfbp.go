// Package perfbp opens hardware write watchpoints (perf breakpoint
// events): the loader arms them on a Python target's threads, and the
// benchmarks' baselines (internal/benchprobes) run an empty program on
// them. It talks to the kernel (perf_event_open) and nothing else.
package perfbp

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Breakpoint constants (linux/hw_breakpoint.h).
const (
	TypeWrite = 2 // HW_BREAKPOINT_W
	Len8      = 8 // HW_BREAKPOINT_LEN_8
)

// perf_event_attr bits of Linux 5.13: inherit_thread limits inherit to
// threads (CLONE_THREAD), so a forked child carries no breakpoint and its
// calls are not taken for the target's; remove_on_exec drops the breakpoint
// at an execve, so the new program is never trapped at an address that meant
// something only in the old one.
const (
	bitInheritThread = 1 << 35
	bitRemoveOnExec  = 1 << 36
)

// OpenWrite opens on thread tid a sampling write watchpoint on the 8 bytes
// at addr, inherited by the thread's new threads and dropped on exec, and
// returns its perf event fd, for a BPF program to be attached to it.
func OpenWrite(tid int, addr uint64) (int, error) {
	fd, err := open(tid, addr, bitInheritThread|bitRemoveOnExec)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.E2BIG) {
		// An older kernel: a forked child inherits the breakpoint, and
		// watch_hit ignores its hits by their process; the daemon detaches
		// on exec.
		fd, err = open(tid, addr, 0)
	}
	return fd, err
}

func open(tid int, addr uint64, extra uint64) (int, error) {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_BREAKPOINT,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample:      1,
		Bits:        unix.PerfBitInherit | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv | extra,
		Bp_type:     TypeWrite,
		Ext1:        addr,
		Ext2:        Len8,
		Wakeup:      1,
		Sample_type: unix.PERF_SAMPLE_IP,
	}
	return unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
}
