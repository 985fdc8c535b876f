//go:build cgo

package gpu

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// The dgxh200 mock stubs identity, memory and MIG calls only; the state the
// sampler reads is stubbed here through the mock's function fields, from one
// fakeGPU per device that the tests change between rounds.
type fakeGPU struct {
	pids          []uint32
	util, memUtil uint32 // percent
	memUsed       uint64
	sm, mem       uint32 // MHz
	powerMW       uint32
	energyMJ      uint64
	temp          uint32
	throttle      uint64
	gpm           [4]float64 // SM, occupancy, tensor, DRAM, percent
	noEnergy      bool       // the GPU does not support the energy counter
	noGPM         bool
}

type fakeServer struct {
	*server.Server
	mu   sync.Mutex
	gpus []*fakeGPU
}

type fakeSample struct{ dev int }

func (f *fakeSample) Free() nvml.Return                   { return nvml.SUCCESS }
func (f *fakeSample) Get(nvml.Device) nvml.Return         { return nvml.SUCCESS }
func (f *fakeSample) MigGet(nvml.Device, int) nvml.Return { return nvml.SUCCESS }

func newFakeH200() *fakeServer {
	f := &fakeServer{Server: dgxh200.New()}
	for i, d := range f.Devices {
		g := &fakeGPU{util: 50, memUtil: 20, memUsed: 40 << 30, sm: 1980, mem: 2619, powerMW: 400000, energyMJ: 1_000_000, temp: 50}
		f.gpus = append(f.gpus, g)
		stubDevice(f, d.(*server.Device), i, g)
	}
	f.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) { return &fakeSample{dev: -1}, nvml.SUCCESS }
	f.GpmMetricsGetFunc = func(m *nvml.GpmMetricsGetType) nvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		g := f.gpus[m.Sample2.(*fakeSample).dev]
		for j := 0; j < int(m.NumMetrics); j++ {
			switch nvml.GpmMetricId(m.Metrics[j].MetricId) {
			case nvml.GPM_METRIC_SM_UTIL:
				m.Metrics[j].Value = g.gpm[0]
			case nvml.GPM_METRIC_SM_OCCUPANCY:
				m.Metrics[j].Value = g.gpm[1]
			case nvml.GPM_METRIC_ANY_TENSOR_UTIL:
				m.Metrics[j].Value = g.gpm[2]
			case nvml.GPM_METRIC_DRAM_BW_UTIL:
				m.Metrics[j].Value = g.gpm[3]
			default:
				m.Metrics[j].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return nvml.SUCCESS
	}
	return f
}

func stubDevice(f *fakeServer, d *server.Device, i int, g *fakeGPU) {
	lock := func() func() { f.mu.Lock(); return f.mu.Unlock }
	d.MemoryInfo.Used = g.memUsed
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		defer lock()()
		var out []nvml.ProcessInfo
		for _, p := range g.pids {
			out = append(out, nvml.ProcessInfo{Pid: p, UsedGpuMemory: 1 << 30})
		}
		return out, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		defer lock()()
		return nvml.Utilization{Gpu: g.util, Memory: g.memUtil}, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		defer lock()()
		return nvml.Memory{Total: d.MemoryInfo.Total, Used: g.memUsed, Free: d.MemoryInfo.Total - g.memUsed}, nvml.SUCCESS
	}
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		defer lock()()
		if c == nvml.CLOCK_SM {
			return g.sm, nvml.SUCCESS
		}
		return g.mem, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		defer lock()()
		return g.powerMW, nvml.SUCCESS
	}
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		defer lock()()
		if g.noEnergy {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return g.energyMJ, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		defer lock()()
		return g.temp, nvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		defer lock()()
		return g.throttle, nvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		if g.noGPM {
			return nvml.GpmSupport{}, nvml.SUCCESS
		}
		return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
		s.(*fakeSample).dev = i
		return nvml.SUCCESS
	}
}

// set changes fake state under the lock the stubs read it with.
func (f *fakeServer) set(fn func(g []*fakeGPU)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.gpus)
}

// fakeClock is the sampler's clock in tests: rounds happen when step says.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// newTestSampler is a sampler on f driven by a fake clock (no goroutine:
// tests call round).
func newTestSampler(f *fakeServer, opts Options) (*Sampler, *fakeClock) {
	s := New(f, opts)
	c := &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s.now = c.now
	return s, c
}
