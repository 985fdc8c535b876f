//go:build cgo

package gpu

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestCheckOutput runs the device check's code against the mock (the real
// run is scripts/gpu-check.sh on a GPU machine).
func TestCheckOutput(t *testing.T) {
	f := newFakeH200()
	o := CheckOptions{Options: DefaultOptions(), Duration: 60 * time.Millisecond}
	o.Interval = 10 * time.Millisecond
	var out bytes.Buffer
	go func() {
		for i := 0; i < 5; i++ {
			time.Sleep(10 * time.Millisecond)
			f.set(func(g []*fakeGPU) { g[0].energyMJ += 1000 })
		}
	}()
	if err := check(f, &out, o); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if testing.Verbose() {
		t.Log(s)
	}
	for _, want := range []string{"driver 550.54.15", "DeviceGetUtilizationRates", "calls/s", "GPU 7 NVIDIA H200", "energy", "median gap"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in:\n%s", want, s)
		}
	}
	if len(f.ShutdownCalls()) != 2 {
		t.Errorf("%d Shutdown calls, want 2 (one per Init)", len(f.ShutdownCalls()))
	}
}
