package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/internal/perfbp"
)

// ErrWatchpointsSilent: the kernel accepts a hardware watchpoint but the
// machine never delivers its debug exception. Seen on a KVM guest on an AMD
// host: perf_event_open succeeds, gdb's `watch` is silent too, and a Python
// target would be traced as if it made no call at all.
var ErrWatchpointsSilent = errors.New("hardware watchpoints are accepted but never fire on this machine " +
	"(its hypervisor does not deliver debug exceptions to the guest): " +
	"Python stages cannot be traced here, native stages can")

var watchFire struct {
	once sync.Once
	err  error
}

// WatchpointsFire tells whether a hardware write watchpoint fires on this
// machine, by arming one on a word of this process and writing the word
// from the same thread. The answer is the machine's: it is found once.
func WatchpointsFire() error {
	watchFire.once.Do(func() { watchFire.err = probeWatchpoint() })
	return watchFire.err
}

// store writes v to p with a plain store, as CPython changes a reference
// count. Not inlined, so each write stays; not atomic: QEMU's TCG (the test
// guests) now and then misses a hit of an atomic exchange (a make test run
// counted 2 of 4; 1 of 300 probes on 6.12), none of plain stores (900
// probes on 6.1 and 6.12).
//
//go:noinline
func store(p *uint64, v uint64) { *p = v }

func probeWatchpoint() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	word := new(uint64)
	attr := unix.PerfEventAttr{
		Type:    unix.PERF_TYPE_BREAKPOINT,
		Size:    uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:    unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv, // counting, not sampling
		Bp_type: perfbp.TypeWrite,
		Ext1:    uint64(uintptr(unsafe.Pointer(word))),
		Ext2:    perfbp.Len8,
	}
	// This thread only (pid 0, any CPU): the writes below are its own.
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("a hardware watchpoint could not be opened: %w", err)
	}
	defer unix.Close(fd)
	const writes = 4
	for i := range writes {
		store(word, uint64(i+1))
	}
	runtime.KeepAlive(word)
	var buf [8]byte
	if n, err := unix.Read(fd, buf[:]); err != nil || n != len(buf) {
		return fmt.Errorf("reading the watchpoint's count: %v", err)
	}
	if got := binary.NativeEndian.Uint64(buf[:]); got != writes {
		if got == 0 {
			return ErrWatchpointsSilent
		}
		return fmt.Errorf("a hardware watchpoint counted %d of %d writes", got, writes)
	}
	return nil
}
