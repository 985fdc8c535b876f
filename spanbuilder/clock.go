package spanbuilder

import (
	"time"

	"golang.org/x/sys/unix"
)

// Clock converts CLOCK_BOOTTIME nanoseconds (bpf_ktime_get_boot_ns) to wall
// time. Boot time, unlike monotonic time, keeps counting across suspend, so
// one offset taken at start stays right.
type Clock struct {
	OffsetNs int64 // realtime - boottime
}

// NewClock measures the offset, keeping the reading bracketed most tightly.
func NewClock() Clock {
	best := int64(-1)
	var off int64
	for i := 0; i < 16; i++ {
		var a, b unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &a)
		var bt unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &bt)
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &b)
		width := b.Nano() - a.Nano()
		if best < 0 || width < best {
			best = width
			off = (a.Nano()+b.Nano())/2 - bt.Nano()
		}
	}
	return Clock{OffsetNs: off}
}

// Wall converts a boot-time stamp.
func (c Clock) Wall(bootNs uint64) time.Time {
	return time.Unix(0, int64(bootNs)+c.OffsetNs)
}

// BootNow is the current boot time, for stamping events that specprobe makes up
// (a thread found dead, a detach).
func BootNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return uint64(ts.Nano())
}
