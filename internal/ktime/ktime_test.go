package ktime

import (
	"testing"
	"time"
)

func TestBootNowAdvances(t *testing.T) {
	a := BootNow()
	time.Sleep(2 * time.Millisecond)
	b := BootNow()
	if b <= a || time.Duration(b-a) < 2*time.Millisecond {
		t.Errorf("BootNow went from %d to %d over a 2ms sleep", a, b)
	}
}

// TestBootOffset: boot time plus the offset is the wall clock, to well
// under a millisecond.
func TestBootOffset(t *testing.T) {
	off := BootOffset()
	wall := time.Unix(0, int64(BootNow())+off)
	if d := time.Since(wall); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("boot time + offset is %s from the wall clock", d)
	}
}
