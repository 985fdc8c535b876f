//go:build cgo

package gpu

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// TestInitFailsNothingElseCalled: after a failed Init the bare mock (every
// unstubbed method panics) sees no other call, and there is one line.
func TestInitFailsNothingElseCalled(t *testing.T) {
	for _, r := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_UNKNOWN} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return r }}
		s := New(lib, DefaultOptions())
		var log bytes.Buffer
		if s.Start(pid, &log) {
			t.Fatalf("%v: Start succeeded", r)
		}
		if strings.Count(log.String(), "\n") != 1 || !strings.Contains(log.String(), "GPU state off") {
			t.Errorf("%v: log %q, want one line", r, log.String())
		}
		s.Stop()
		if s.StageAttrs(pid, time.Now(), time.Now()) != nil || s.LiveColumns() != "" || len(lib.InitCalls()) != 1 {
			t.Errorf("%v: GPU state after a failed Init", r)
		}
		if got := s.SummaryLines(); len(got) != 1 || !strings.Contains(got[0], "off") {
			t.Errorf("summary %q", got)
		}
	}
}

func TestNoGPUOrCountFails(t *testing.T) {
	for name, count := range map[string]func() (int, nvml.Return){
		"no GPU":      func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		"count fails": func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN },
	} {
		shut := 0
		lib := &mock.Interface{
			InitFunc:           func() nvml.Return { return nvml.SUCCESS },
			DeviceGetCountFunc: count,
			ShutdownFunc:       func() nvml.Return { shut++; return nvml.SUCCESS },
			ExtensionsFunc: func() nvml.ExtendedInterface {
				return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
			},
		}
		var log bytes.Buffer
		if New(lib, DefaultOptions()).Start(pid, &log) {
			t.Fatalf("%s: Start succeeded", name)
		}
		if strings.Count(log.String(), "\n") != 1 || shut != 1 {
			t.Errorf("%s: log %q, %d Shutdown calls", name, log.String(), shut)
		}
	}
}

// TestFailingCallDuringSampling: a call that panics (here: a stub taken away)
// turns GPU state off with one line; it does not take the tracer down.
func TestFailingCallDuringSampling(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[0].pids = []uint32{pid} })
	s, c := newTestSampler(f, DefaultOptions())
	var log bytes.Buffer
	if !s.begin(pid, &log) {
		t.Fatal("begin failed")
	}
	f.Devices[0].(*server.Device).GetPowerUsageFunc = nil
	c.t = c.t.Add(100 * time.Millisecond)
	if s.safeRound(c.t) {
		t.Fatal("round survived a panicking call")
	}
	if s.Active() || !strings.Contains(log.String(), "sampling failed") {
		t.Errorf("active %v, log %q", s.Active(), log.String())
	}
}

// TestRealNVMLWithoutLibrary runs go-nvml's real binding: on a machine
// without libnvidia-ml.so.1 Init fails and nothing else is called (which
// would kill the process).
func TestRealNVMLWithoutLibrary(t *testing.T) {
	s := Open(DefaultOptions())
	var log bytes.Buffer
	if s.Start(pid, &log) {
		s.Stop()
		t.Skip("this machine has NVML and a GPU")
	}
	if !strings.Contains(log.String(), "GPU state off") || strings.Count(log.String(), "\n") != 1 {
		t.Errorf("log %q", log.String())
	}
	if s.StageAttrs(pid, time.Now().Add(-time.Millisecond), time.Now()) != nil {
		t.Error("GPU attributes without NVML")
	}
}
