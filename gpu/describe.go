//go:build cgo

package gpu

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Describe says what NVML offers on this machine, for `specprobe doctor`:
// the driver and NVML versions and the GPUs, or why GPU state will be off.
// ok is false when it will be.
func Describe() (ok bool, detail string) { return describe(nvml.New()) }

func describe(lib nvml.Interface) (bool, string) {
	if r := lib.Init(); r != nvml.SUCCESS {
		return false, initError(r).Error() + ": spans get no GPU state, tracing works without"
	}
	defer lib.Shutdown()
	drv, r := lib.SystemGetDriverVersion()
	if r != nvml.SUCCESS {
		drv = "unknown (" + retName(r) + ")"
	}
	ver, r := lib.SystemGetNVMLVersion()
	if r != nvml.SUCCESS {
		ver = "unknown (" + retName(r) + ")"
	}
	head := fmt.Sprintf("libnvidia-ml.so.1 found, driver %s, NVML %s", drv, ver)
	n, r := lib.DeviceGetCount()
	switch {
	case r != nvml.SUCCESS:
		return false, fmt.Sprintf("%s; counting the GPUs failed: %s", head, retName(r))
	case n == 0:
		return false, head + "; no GPU"
	}
	var names []string
	count := map[string]int{}
	for i := range n {
		name := fmt.Sprintf("GPU %d (unreadable)", i)
		if d, r := lib.DeviceGetHandleByIndex(i); r == nvml.SUCCESS {
			if s, r := d.GetName(); r == nvml.SUCCESS && s != "" {
				name = s
			}
		}
		if count[name] == 0 {
			names = append(names, name)
		}
		count[name]++
	}
	for i, name := range names {
		if c := count[name]; c > 1 {
			names[i] = fmt.Sprintf("%d× %s", c, name)
		}
	}
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return true, fmt.Sprintf("%s; %d GPU%s: %s", head, n, plural, strings.Join(names, ", "))
}
