// Package ktime is specprobe's one reading of the kernel's clocks. BPF
// programs stamp events with bpf_ktime_get_boot_ns() and the exec
// tracepoint with the same clock; user space compares against BootNow and
// converts to wall time with BootOffset.
package ktime

import "golang.org/x/sys/unix"

// BootNow is CLOCK_BOOTTIME now in nanoseconds: the clock of the BPF
// programs' timestamps. Unlike CLOCK_MONOTONIC it keeps counting across
// suspend.
func BootNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return uint64(ts.Nano())
}

// BootOffset is CLOCK_REALTIME minus CLOCK_BOOTTIME in nanoseconds: add it
// to a boot-time stamp to get Unix time. Of several readings it keeps the
// one whose two realtime reads bracket the boot-time read most tightly.
func BootOffset() int64 {
	best := int64(-1)
	var off int64
	for range 16 {
		var a, bt, b unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &a)
		_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &bt)
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &b)
		if width := b.Nano() - a.Nano(); best < 0 || width < best {
			best = width
			off = (a.Nano()+b.Nano())/2 - bt.Nano()
		}
	}
	return off
}
