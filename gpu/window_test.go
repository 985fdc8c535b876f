//go:build cgo

package gpu

import (
	"bytes"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// run samples every 100ms for n rounds; the energy counter advances by
// powerW*0.1 J per round, so a stage's energy share should come out at
// powerW times its duration.
func run(s *Sampler, f *fakeServer, c *fakeClock, n int, powerW uint64) {
	for i := 0; i < n; i++ {
		c.t = c.t.Add(100 * time.Millisecond)
		f.set(func(g []*fakeGPU) {
			for _, x := range g {
				x.energyMJ += powerW * 100
			}
		})
		s.round(c.t)
	}
}

func TestStageWindow(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[6].pids = []uint32{pid}; g[6].powerMW = 500000; g[6].throttle = 0x4 })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	t0 := c.t
	run(s, f, c, 5, 500)
	f.set(func(g []*fakeGPU) { g[6].throttle = 0x1; g[6].util = 99 })
	run(s, f, c, 5, 500)

	// A 10ms stage in the sixth interval: its window closes at t0+600ms.
	start := t0.Add(520 * time.Millisecond)
	m := attrMap(s.StageAttrs(pid, start, start.Add(10*time.Millisecond)))
	if m["hw.id"].AsString() != f.Devices[6].(*server.Device).UUID {
		t.Errorf("hw.id %v", m["hw.id"])
	}
	if e := m["hw.energy"].AsFloat64(); math.Abs(e-5) > 1e-9 {
		t.Errorf("hw.energy %v J, want 5 (500W for 10ms)", e)
	}
	if w := m["specprobe.gpu.energy.window"].AsFloat64(); math.Abs(w-50) > 1e-9 {
		t.Errorf("window energy %v J, want 50", w)
	}
	if d := m["specprobe.gpu.energy.window_duration"].AsFloat64(); math.Abs(d-0.1) > 1e-9 {
		t.Errorf("window %vs, want 0.1", d)
	}
	// The window spans the throttle change: both reasons show.
	if r := m["specprobe.gpu.throttle_reasons"].AsString(); r != "gpu_idle,sw_power_cap" {
		t.Errorf("throttle reasons %q", r)
	}
	if u := m["hw.gpu.utilization"].AsFloat64(); u != 0.99 {
		t.Errorf("utilisation %v: want the sample closing the window", u)
	}
	for k, want := range map[string]attribute.Type{
		"hw.power": attribute.FLOAT64, "hw.temperature": attribute.FLOAT64, "hw.gpu.memory.usage": attribute.INT64,
		"hw.gpu.memory.limit": attribute.INT64, "hw.gpu.memory.utilization": attribute.FLOAT64,
		"specprobe.gpu.clock.sm": attribute.INT64, "specprobe.gpu.clock.memory": attribute.INT64,
		"specprobe.gpu.memory.activity": attribute.FLOAT64, "specprobe.gpu.sm_activity": attribute.FLOAT64,
		"specprobe.gpu.sm_occupancy": attribute.FLOAT64, "specprobe.gpu.tensor_activity": attribute.FLOAT64,
		"specprobe.gpu.dram_activity": attribute.FLOAT64,
	} {
		if m[k].Type() != want {
			t.Errorf("%s: type %v, want %v", k, m[k].Type(), want)
		}
	}
	if m["hw.power"].AsFloat64() != 500 || m["hw.gpu.memory.limit"].AsInt64() != int64(f.Devices[6].(*server.Device).MemoryInfo.Total) {
		t.Errorf("power %v, memory limit %v", m["hw.power"], m["hw.gpu.memory.limit"])
	}

	// A stage that ended after the last sample: no closing counter update
	// yet, so no energy, but the latest state.
	late := c.t.Add(20 * time.Millisecond)
	m = attrMap(s.StageAttrs(pid, late, late.Add(5*time.Millisecond)))
	if _, ok := m["hw.energy"]; ok {
		t.Error("energy without the sample that closes the window")
	}
	if m["hw.power"].AsFloat64() != 500 {
		t.Errorf("power %v on a stage past the last sample", m["hw.power"])
	}
	// Long after sampling stopped: nothing.
	gone := c.t.Add(time.Minute)
	if a := s.StageAttrs(pid, gone, gone.Add(time.Millisecond)); a != nil {
		t.Errorf("stale attributes %v", a)
	}
	// Another process's stage: nothing.
	if a := s.StageAttrs(pid+1, start, start.Add(time.Millisecond)); a != nil {
		t.Errorf("attributes for another PID: %v", a)
	}
}

// TestCoarseEnergyCounter: a counter that moves every 300ms still brackets
// the stage, over a wider window.
func TestCoarseEnergyCounter(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[0].pids = []uint32{pid} })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	t0 := c.t
	for i := 1; i <= 12; i++ {
		c.t = c.t.Add(100 * time.Millisecond)
		if i%3 == 0 {
			f.set(func(g []*fakeGPU) { g[0].energyMJ += 300 * 300 }) // 300W over 300ms
		}
		s.round(c.t)
	}
	start := t0.Add(350 * time.Millisecond) // counter moved at 300ms and 600ms
	m := attrMap(s.StageAttrs(pid, start, start.Add(30*time.Millisecond)))
	if e := m["hw.energy"].AsFloat64(); math.Abs(e-9) > 1e-9 {
		t.Errorf("hw.energy %v, want 9 J (300W for 30ms)", e)
	}
	if d := m["specprobe.gpu.energy.window_duration"].AsFloat64(); math.Abs(d-0.3) > 1e-9 {
		t.Errorf("window %vs, want 0.3", d)
	}
}

func TestMultiGPUArrays(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) {
		g[1].pids, g[3].pids = []uint32{pid}, []uint32{pid}
		g[1].powerMW, g[3].powerMW = 300000, 700000
		g[3].noEnergy = true
	})
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	run(s, f, c, 4, 300)
	start := c.t.Add(-250 * time.Millisecond)
	kvs := s.StageAttrs(pid, start, start.Add(time.Millisecond))
	m := attrMap(kvs)
	ids := m["hw.id"].AsStringSlice()
	if len(ids) != 2 || ids[0] != f.Devices[1].(*server.Device).UUID || ids[1] != f.Devices[3].(*server.Device).UUID {
		t.Errorf("hw.id %v", ids)
	}
	if p := m["hw.power"].AsFloat64Slice(); len(p) != 2 || p[0] != 300 || p[1] != 700 {
		t.Errorf("hw.power %v", p)
	}
	if _, ok := m["hw.energy"]; ok {
		t.Error("hw.energy though one GPU has no energy counter")
	}
	// A batched call asks again with the same interval: the same answer.
	if again := s.StageAttrs(pid, start, start.Add(time.Millisecond)); &again[0] != &kvs[0] {
		t.Error("the repeated interval was computed again")
	}
}
