//go:build cgo

package gpu

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

const pid = 4242

func uuids(ds []Device) []int {
	var out []int
	for _, d := range ds {
		out = append(out, d.Index)
	}
	return out
}

func TestSelectsGPUsByPID(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) {
		g[0].pids = []uint32{1, 2}
		g[2].pids = []uint32{7, pid}
		g[5].pids = []uint32{pid}
	})
	s, c := newTestSampler(f, DefaultOptions())
	var log bytes.Buffer
	if !s.begin(pid, &log) {
		t.Fatalf("begin failed: %s", log.String())
	}
	if got := uuids(s.Used()); len(got) != 2 || got[0] != 2 || got[1] != 5 {
		t.Fatalf("used GPUs %v, want [2 5]", got)
	}
	line := log.String()
	if strings.Count(line, "\n") != 1 || !strings.Contains(line, f.Devices[2].(*server.Device).UUID) || !strings.Contains(line, "NVIDIA H200") {
		t.Errorf("start line %q: want one line naming GPU 2 and 5 by UUID", line)
	}
	// Only the GPUs the PID uses are sampled.
	for i, d := range f.Devices {
		n := len(d.(*server.Device).GetUtilizationRatesCalls())
		if want := map[bool]int{true: 1, false: 0}[i == 2 || i == 5]; n != want {
			t.Errorf("GPU %d: %d utilisation calls, want %d", i, n, want)
		}
	}
	// The process moves: seen at the next process scan, not before.
	f.set(func(g []*fakeGPU) { g[2].pids, g[5].pids, g[7].pids = nil, nil, []uint32{pid} })
	c.t = c.t.Add(500 * time.Millisecond)
	s.round(c.t)
	if got := uuids(s.Used()); len(got) != 2 {
		t.Errorf("used GPUs %v before the next scan, want the old [2 5]", got)
	}
	c.t = c.t.Add(600 * time.Millisecond)
	s.round(c.t)
	if got := uuids(s.Used()); len(got) != 1 || got[0] != 7 {
		t.Errorf("used GPUs %v after the scan, want [7]", got)
	}
}

func TestNoContextYet(t *testing.T) {
	f := newFakeH200()
	s, _ := newTestSampler(f, DefaultOptions())
	var log bytes.Buffer
	if !s.begin(pid, &log) {
		t.Fatal("begin failed")
	}
	if !strings.Contains(log.String(), "no compute context") || len(s.Used()) != 0 {
		t.Errorf("log %q, used %v", log.String(), s.Used())
	}
	if a := s.StageAttrs(pid, time.Now(), time.Now()); a != nil {
		t.Errorf("attributes without a GPU: %v", a)
	}
}

func TestSampleValues(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) {
		g[3].pids = []uint32{pid}
		g[3].util, g[3].memUtil, g[3].powerMW, g[3].temp = 87, 33, 612500, 61
		g[3].throttle = 0x4 | 0x20
		g[3].gpm = [4]float64{75, 40, 55, 30}
	})
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	c.t = c.t.Add(500 * time.Millisecond) // the second GPM sample: metrics from here
	s.round(c.t)
	l := s.latest()
	if len(l) != 1 {
		t.Fatalf("%d GPUs sampled, want 1", len(l))
	}
	got := l[0].smp
	want := Sample{At: c.t, MemAt: c.t.Add(-500 * time.Millisecond), GPMFrom: c.t.Add(-500 * time.Millisecond), GPMAt: c.t, Have: ^Field(0) & (FDRAM<<1 - 1), Util: 0.87, MemActivity: 0.33, MemUsed: 40 << 30, SMClock: 1980, MemClock: 2619,
		PowerW: 612.5, EnergyMJ: 1_000_000, TempC: 61, Throttle: 0x24, SMActivity: 0.75, SMOccupancy: 0.4, TensorActivity: 0.55, DRAMActivity: 0.3}
	if got != want {
		t.Errorf("sample\n got %+v\nwant %+v", got, want)
	}
	if ThrottleReasons(got.Throttle) != "sw_power_cap,sw_thermal_slowdown" {
		t.Errorf("throttle reasons %q", ThrottleReasons(got.Throttle))
	}
}

// TestIntervals: ten seconds at the default intervals make the calls
// docs/design.md allows and no more.
func TestIntervals(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[1].pids = []uint32{pid} })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	for i := 1; i < 100; i++ {
		c.t = c.t.Add(100 * time.Millisecond)
		s.round(c.t)
	}
	calls := s.Calls()
	want := map[string]uint64{
		"DeviceGetUtilizationRates":        100,
		"DeviceGetPowerUsage":              100,
		"DeviceGetTotalEnergyConsumption":  100, // no more often than the counter moves
		"DeviceGetMemoryInfo":              10,
		"DeviceGetComputeRunningProcesses": 10 * 8, // every GPU: the PID may move
		"DeviceGetTemperature":             10,
		"GpmSampleGet":                     20,
		"GpmMetricsGet":                    19,
	}
	for name, n := range want {
		if calls[name].Calls != n {
			t.Errorf("%s: %d calls in 10s, want %d", name, calls[name].Calls, n)
		}
	}
	var total uint64
	for _, st := range calls {
		total += st.Calls
	}
	if perSec := float64(total-2) / 10; perSec > 1000 { // less Init and DeviceGetCount
		t.Errorf("%.0f NVML calls/s at the defaults", perSec)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{
		{Interval: 5 * time.Millisecond, ProcessInterval: time.Second, GPMInterval: time.Second},
		{Interval: 100 * time.Millisecond, ProcessInterval: 100 * time.Millisecond, GPMInterval: time.Second},
		{Interval: 100 * time.Millisecond, ProcessInterval: time.Second, GPMInterval: 100 * time.Millisecond},
	} {
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	for _, f := range []func(*Options){
		func(o *Options) { o.EnergyInterval = 50 * time.Millisecond }, // faster than the counter moves
		func(o *Options) { o.MemoryInterval = 20 * time.Millisecond },
		func(o *Options) { o.WindowMin = 500 * time.Millisecond },
	} {
		o := DefaultOptions()
		f(&o)
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestUnsupportedFieldIsLeftOutAndNotAskedAgain(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[0].pids = []uint32{pid}; g[0].noEnergy = true; g[0].noGPM = true })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	for i := 0; i < 5; i++ {
		c.t = c.t.Add(100 * time.Millisecond)
		s.round(c.t)
	}
	if n := s.Calls()["DeviceGetTotalEnergyConsumption"].Calls; n != 1 {
		t.Errorf("%d energy calls, want 1 (unsupported: not asked again)", n)
	}
	if n := s.Calls()["GpmSampleGet"].Calls; n != 0 {
		t.Errorf("%d GPM calls on a GPU without GPM", n)
	}
	smp := s.latest()[0].smp
	if smp.Have&(FEnergy|FSMActivity) != 0 || smp.Have&FPower == 0 {
		t.Errorf("fields %b: want power, no energy, no GPM", smp.Have)
	}
}

func TestStartStopRealTime(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[4].pids = []uint32{pid} })
	o := DefaultOptions()
	o.Interval = 10 * time.Millisecond
	s := New(f, o)
	if !s.Start(pid, &bytes.Buffer{}) {
		t.Fatal("Start failed")
	}
	time.Sleep(60 * time.Millisecond)
	s.Stop()
	n := s.Calls()["DeviceGetUtilizationRates"].Calls
	if n < 2 {
		t.Errorf("%d samples in 60ms at 10ms", n)
	}
	if l := s.SummaryLines(); len(l) != 2 || !strings.Contains(l[0], "GPU 4 NVIDIA H200") ||
		!strings.HasPrefix(l[1], "NVML cost: ") || !strings.Contains(l[1], "DeviceGetUtilizationRates") {
		t.Errorf("summary %q", s.SummaryLines())
	}
	if len(f.ShutdownCalls()) != 1 {
		t.Errorf("NVML not shut down")
	}
}
