package spanbuilder

import (
	"time"

	"github.com/specprobe/specprobe/internal/ktime"
)

// Clock converts CLOCK_BOOTTIME nanoseconds (bpf_ktime_get_boot_ns) to wall
// time. Boot time, unlike monotonic time, keeps counting across suspend, so
// one offset taken at start stays right.
type Clock struct {
	OffsetNs int64 // realtime - boottime
}

// NewClock measures the offset.
func NewClock() Clock { return Clock{OffsetNs: ktime.BootOffset()} }

// Wall converts a boot-time stamp.
func (c Clock) Wall(bootNs uint64) time.Time {
	return time.Unix(0, int64(bootNs)+c.OffsetNs)
}

// BootNow is the current boot time, for stamping events that specprobe makes
// up (a thread found dead, a detach). It is ktime.BootNow, kept here for the
// packages that stamp span events.
func BootNow() uint64 { return ktime.BootNow() }
