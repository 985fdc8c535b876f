//go:build cgo

package gpu

import (
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// New returns a sampler on lib: nvml.New() in production, a go-nvml mock
// server in tests. Nothing is called on lib before Start.
func New(lib nvml.Interface, opts Options) *Sampler {
	b := &nvmlBackend{lib: lib}
	s := newSampler(b, opts)
	b.calls = s.calls
	return s
}

// Open returns a sampler on the system's NVML (libnvidia-ml.so.1, opened at
// Start; its absence is reported then, not here).
func Open(opts Options) *Sampler { return New(nvml.New(), opts) }

type nvmlBackend struct {
	lib   nvml.Interface
	calls *callStats
	devs  []nvml.Device
	off   []Field // by device: fields it does not support, never asked again
	// nvmlDeviceGetCurrentClocksEventReasons is the driver 535+ name; calling
	// a symbol the library lacks would kill the process, so look first.
	eventReasons bool
	gpms         []*gpmState // by device, nil where GPM is unsupported
	metrics      *nvml.GpmMetricsGetType
}

type gpmState struct {
	prev, cur nvml.GpmSample
	primed    bool // prev holds a sample
}

func (b *nvmlBackend) call(name string, f func() nvml.Return) nvml.Return {
	t := time.Now()
	r := f()
	b.calls.add(name, time.Since(t), r != nvml.SUCCESS)
	return r
}

func (b *nvmlBackend) open() ([]Device, error) {
	if r := b.call("Init", b.lib.Init); r != nvml.SUCCESS {
		return nil, initError(r)
	}
	var n int
	r := b.call("DeviceGetCount", func() (r nvml.Return) { n, r = b.lib.DeviceGetCount(); return })
	if r != nvml.SUCCESS {
		b.lib.Shutdown()
		return nil, fmt.Errorf("NVML DeviceGetCount failed: %s", retName(r))
	}
	ext := b.lib.Extensions()
	b.eventReasons = ext.LookupSymbol("nvmlDeviceGetCurrentClocksEventReasons") == nil
	gpmLib := ext.LookupSymbol("nvmlGpmQueryDeviceSupport") == nil
	var out []Device
	for i := 0; i < n; i++ {
		dev, r := b.lib.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			continue // a GPU we may not open (cgroup, lost): skip, sample the rest
		}
		d := Device{Index: i}
		d.UUID, _ = dev.GetUUID()
		d.Name, _ = dev.GetName()
		if mem, r := dev.GetMemoryInfo(); r == nvml.SUCCESS {
			d.MemTotal = mem.Total
		}
		b.devs = append(b.devs, dev)
		b.off = append(b.off, 0)
		b.gpms = append(b.gpms, b.openGPM(dev, gpmLib))
		out = append(out, d)
	}
	b.metrics = &nvml.GpmMetricsGetType{}
	return out, nil
}

// openGPM allocates the two samples GPM metrics are computed between.
func (b *nvmlBackend) openGPM(dev nvml.Device, lib bool) *gpmState {
	if !lib {
		return nil
	}
	if sup, r := dev.GpmQueryDeviceSupport(); r != nvml.SUCCESS || sup.IsSupportedDevice == 0 {
		return nil
	}
	prev, r1 := b.lib.GpmSampleAlloc()
	cur, r2 := b.lib.GpmSampleAlloc()
	if r1 != nvml.SUCCESS || r2 != nvml.SUCCESS {
		return nil
	}
	return &gpmState{prev: prev, cur: cur}
}

func (b *nvmlBackend) pids(i int) ([]uint32, error) {
	var procs []nvml.ProcessInfo
	r := b.call("DeviceGetComputeRunningProcesses", func() (r nvml.Return) {
		procs, r = b.devs[i].GetComputeRunningProcesses()
		return
	})
	if r != nvml.SUCCESS {
		return nil, fmt.Errorf("GetComputeRunningProcesses: %s", retName(r))
	}
	out := make([]uint32, len(procs))
	for j, p := range procs {
		out[j] = p.Pid
	}
	return out, nil
}

// read makes one call for field f unless the device is known not to support
// it; an unsupported field is never asked again.
func (b *nvmlBackend) read(i int, f Field, s *Sample, name string, get func() nvml.Return) {
	if b.off[i]&f != 0 {
		return
	}
	switch r := b.call(name, get); r {
	case nvml.SUCCESS:
		s.Have |= f
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_NO_PERMISSION:
		b.off[i] |= f
	case nvml.ERROR_GPU_IS_LOST:
		b.off[i] = ^Field(0)
	}
}

func (b *nvmlBackend) fast(i int, s *Sample, energy, mem bool) {
	d := b.devs[i]
	b.read(i, FUtil|FMemActivity, s, "DeviceGetUtilizationRates", func() nvml.Return {
		u, r := d.GetUtilizationRates()
		s.Util, s.MemActivity = float64(u.Gpu)/100, float64(u.Memory)/100
		return r
	})
	if mem {
		b.read(i, FMemUsed, s, "DeviceGetMemoryInfo", func() (r nvml.Return) {
			var m nvml.Memory
			m, r = d.GetMemoryInfo()
			s.MemUsed = m.Used
			return
		})
	}
	b.read(i, FSMClock, s, "DeviceGetClockInfo(SM)", func() (r nvml.Return) {
		s.SMClock, r = d.GetClockInfo(nvml.CLOCK_SM)
		return
	})
	b.read(i, FMemClock, s, "DeviceGetClockInfo(MEM)", func() (r nvml.Return) {
		s.MemClock, r = d.GetClockInfo(nvml.CLOCK_MEM)
		return
	})
	b.read(i, FPower, s, "DeviceGetPowerUsage", func() nvml.Return {
		mw, r := d.GetPowerUsage()
		s.PowerW = float64(mw) / 1000
		return r
	})
	if energy {
		b.read(i, FEnergy, s, "DeviceGetTotalEnergyConsumption", func() (r nvml.Return) {
			s.EnergyMJ, r = d.GetTotalEnergyConsumption()
			return
		})
	}
	if b.eventReasons {
		b.read(i, FThrottle, s, "DeviceGetCurrentClocksEventReasons", func() (r nvml.Return) {
			s.Throttle, r = d.GetCurrentClocksEventReasons()
			return
		})
	} else {
		b.read(i, FThrottle, s, "DeviceGetCurrentClocksThrottleReasons", func() (r nvml.Return) {
			s.Throttle, r = d.GetCurrentClocksThrottleReasons()
			return
		})
	}
}

func (b *nvmlBackend) slow(i int, s *Sample) {
	s.Have &^= FTemp
	b.read(i, FTemp, s, "DeviceGetTemperature", func() nvml.Return {
		t, r := b.devs[i].GetTemperature(nvml.TEMPERATURE_GPU)
		s.TempC = float64(t)
		return r
	})
}

var gpmMetrics = []struct {
	id nvml.GpmMetricId
	f  Field
}{
	{nvml.GPM_METRIC_SM_UTIL, FSMActivity},
	{nvml.GPM_METRIC_SM_OCCUPANCY, FSMOccupancy},
	{nvml.GPM_METRIC_ANY_TENSOR_UTIL, FTensor},
	{nvml.GPM_METRIC_DRAM_BW_UTIL, FDRAM},
}

// gpm samples the GPU's performance monitor and, from the second sample on,
// computes activity over the time between the last two.
func (b *nvmlBackend) gpm(i int, s *Sample) (computed bool) {
	g := b.gpms[i]
	if g == nil || b.off[i] == ^Field(0) {
		return false
	}
	if r := b.call("GpmSampleGet", func() nvml.Return { return b.devs[i].GpmSampleGet(g.cur) }); r != nvml.SUCCESS {
		if r == nvml.ERROR_NOT_SUPPORTED || r == nvml.ERROR_GPU_IS_LOST {
			b.gpms[i] = nil
		}
		return false
	}
	if g.primed {
		m := b.metrics
		*m = nvml.GpmMetricsGetType{NumMetrics: uint32(len(gpmMetrics)), Sample1: g.prev, Sample2: g.cur}
		for j, gm := range gpmMetrics {
			m.Metrics[j].MetricId = uint32(gm.id)
		}
		if b.call("GpmMetricsGet", func() nvml.Return { return b.lib.GpmMetricsGet(m) }) == nvml.SUCCESS {
			s.Have &^= FSMActivity | FSMOccupancy | FTensor | FDRAM
			for j, gm := range gpmMetrics {
				if nvml.Return(m.Metrics[j].NvmlReturn) != nvml.SUCCESS {
					continue
				}
				v := m.Metrics[j].Value / 100
				switch gm.f {
				case FSMActivity:
					s.SMActivity = v
				case FSMOccupancy:
					s.SMOccupancy = v
				case FTensor:
					s.TensorActivity = v
				case FDRAM:
					s.DRAMActivity = v
				}
				s.Have |= gm.f
				computed = true
			}
		}
	}
	g.prev, g.cur, g.primed = g.cur, g.prev, true
	return computed
}

func (b *nvmlBackend) close() {
	for _, g := range b.gpms {
		if g != nil {
			g.prev.Free()
			g.cur.Free()
		}
	}
	b.gpms = nil
	b.lib.Shutdown()
}
