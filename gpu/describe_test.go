//go:build cgo

package gpu

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
)

func TestDescribe(t *testing.T) {
	h200 := dgxh200.New()
	h200.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS }
	h200.SystemGetNVMLVersionFunc = func() (string, nvml.Return) { return "12.550.54.15", nvml.SUCCESS }
	ok, got := describe(h200)
	if want := "libnvidia-ml.so.1 found, driver 550.54.15, NVML 12.550.54.15; 8 GPUs: 8× NVIDIA H200 141GB HBM3e"; !ok || got != want {
		t.Errorf("dgxh200: %v %q, want %q", ok, got, want)
	}

	for _, c := range []struct {
		name string
		lib  *mock.Interface
		want string
	}{
		{"no library", &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }},
			"NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine: spans get no GPU state, tracing works without"},
		{"driver not loaded", &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }},
			"NVML: the NVIDIA driver is not loaded"},
		{"no GPU", &mock.Interface{
			InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
			ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
			SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED },
			SystemGetNVMLVersionFunc:   func() (string, nvml.Return) { return "12.0", nvml.SUCCESS },
			DeviceGetCountFunc:         func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		}, "libnvidia-ml.so.1 found, driver unknown (not supported), NVML 12.0; no GPU"},
		{"count fails", &mock.Interface{
			InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
			ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
			SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "535.1", nvml.SUCCESS },
			SystemGetNVMLVersionFunc:   func() (string, nvml.Return) { return "12.535", nvml.SUCCESS },
			DeviceGetCountFunc:         func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN },
		}, "counting the GPUs failed: unknown error"},
	} {
		ok, got := describe(c.lib)
		if ok || !strings.Contains(got, c.want) {
			t.Errorf("%s: %v %q, want not ok and %q", c.name, ok, got, c.want)
		}
		if c.lib.InitFunc() == nvml.SUCCESS && len(c.lib.ShutdownCalls()) != 1 {
			t.Errorf("%s: Shutdown called %d times after a successful Init", c.name, len(c.lib.ShutdownCalls()))
		}
	}
}
