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
// powerW*0.1 J per round.
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

// checkWindow fails unless kvs carry a window that describes [start, end]
// (or carry nothing at all), and returns whether they carry values.
func checkWindow(t *testing.T, kvs []attribute.KeyValue, start, end time.Time) bool {
	t.Helper()
	if len(kvs) == 0 {
		return false
	}
	m := attrMap(kvs)
	ws, ok1 := m[string(KeyWindowStart)]
	wd, ok2 := m[string(KeyWindowDuration)]
	if !ok1 || !ok2 {
		t.Fatalf("GPU values without their window: %v", kvs)
	}
	w := interval{time.Unix(0, ws.AsInt64()), time.Unix(0, ws.AsInt64()).Add(time.Duration(wd.AsFloat64() * 1e9))}
	if !describes(w, interval{start, end}) {
		t.Fatalf("window %v..%v on the span %v..%v", w.start, w.end, start, end)
	}
	return true
}

// TestOneMillisecondStages: an engine of 1 ms stages, one after another for
// 10 s while the sampler runs every 100 ms (GPM at 500 ms, memory at 1 s): no
// stage span carries a GPU value; a 2 s stage carries each value with a
// window that describes it.
func TestOneMillisecondStages(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[6].pids = []uint32{pid}; g[6].gpm = [4]float64{80, 50, 60, 40} })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	t0 := c.t
	run(s, f, c, 100, 500)
	for st := t0; st.Before(c.t); st = st.Add(time.Millisecond) {
		if kvs := s.StageAttrs(pid, st, st.Add(time.Millisecond)); checkWindow(t, kvs, st, st.Add(time.Millisecond)) {
			t.Fatalf("a 1ms stage at %v got GPU values %v", st.Sub(t0), kvs)
		}
	}
	start := t0.Add(5 * time.Second)
	end := start.Add(2 * time.Second)
	kvs := s.StageAttrs(pid, start, end)
	if !checkWindow(t, kvs, start, end) {
		t.Fatal("a 2s stage got no GPU values")
	}
	m := attrMap(kvs)
	if m["hw.id"].AsString() != f.Devices[6].(*server.Device).UUID {
		t.Errorf("hw.id %v", m["hw.id"])
	}
	for k, want := range map[string]float64{"hw.power": 400, "hw.gpu.utilization": 0.5, "specprobe.gpu.sm_activity": 0.8,
		"specprobe.gpu.tensor_activity": 0.6, "specprobe.gpu.memory.activity": 0.2} {
		if got := m[k].AsFloat64(); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s %v, want %v", k, got, want)
		}
	}
	if m["hw.gpu.memory.usage"].AsInt64() != 40<<30 || m["specprobe.gpu.clock.sm"].AsInt64() != 1980 {
		t.Errorf("memory %v, SM clock %v", m["hw.gpu.memory.usage"], m["specprobe.gpu.clock.sm"])
	}
	for _, k := range []string{"hw.temperature", "hw.energy"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s on a stage span", k)
		}
	}
	// A 60 ms stage: the readings that stand for 100 ms, not the averages.
	mid := t0.Add(3*time.Second + 30*time.Millisecond)
	m = attrMap(s.StageAttrs(pid, mid, mid.Add(60*time.Millisecond)))
	if _, ok := m["specprobe.gpu.clock.sm"]; !ok {
		t.Errorf("no SM clock on a 60ms stage: %v", m)
	}
	for _, k := range []string{"hw.power", "hw.gpu.utilization", "specprobe.gpu.sm_activity", "hw.gpu.memory.usage"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s on a 60ms stage", k)
		}
	}
	// Another process's stage: nothing.
	if a := s.StageAttrs(pid+1, start, end); a != nil {
		t.Errorf("attributes for another PID: %v", a)
	}
}

// TestGPUWindows: energy per step and per accepted token over windows
// between counter updates at least 2 s apart.
func TestGPUWindows(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[2].pids = []uint32{pid} })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	t0 := c.t
	// 2 ms steps, a batch of 2 requests each accepting 3 drafts, for 6 s.
	for st := t0; st.Before(t0.Add(6 * time.Second)); st = st.Add(2 * time.Millisecond) {
		s.ObserveStep(pid, 7, st, st.Add(2*time.Millisecond), 3)
		s.ObserveStep(pid, 7, st, st.Add(2*time.Millisecond), 3)
	}
	run(s, f, c, 60, 500)
	if w := s.TakeWindows(c.t); len(w) != 2 {
		t.Fatalf("%d windows closed a second before the end, want 2", len(w))
	}
	ws := s.TakeWindows(c.t.Add(time.Minute))
	if len(ws) != 0 {
		t.Fatalf("windows given twice: %v", ws)
	}
	s2, c2 := newTestSampler(f, DefaultOptions())
	s2.begin(pid, &bytes.Buffer{})
	for st := c2.t; st.Before(c2.t.Add(6 * time.Second)); st = st.Add(2 * time.Millisecond) {
		s2.ObserveStep(pid, 7, st, st.Add(2*time.Millisecond), 3)
		s2.ObserveStep(pid, 7, st, st.Add(2*time.Millisecond), 3)
	}
	run(s2, f, c2, 60, 500)
	ws = s2.TakeWindows(c2.t.Add(time.Minute))
	if len(ws) != 2 {
		t.Fatalf("%d windows in 6s, want 2 of 2s", len(ws))
	}
	for _, w := range ws {
		d := w.End.Sub(w.Start)
		if d != 2*time.Second {
			t.Errorf("window of %v", d)
		}
		m := attrMap(w.Attrs)
		steps := int64(d / (2 * time.Millisecond))
		if m["hw.energy"].AsFloat64() != 1000 || m[string(KeySteps)].AsInt64() != steps || m[string(KeyAccepted)].AsInt64() != 6*steps {
			t.Errorf("window %v: %v", d, w.Attrs)
		}
		if e := m[string(KeyEnergyPerToken)].AsFloat64(); math.Abs(e-1000/float64(6*steps)) > 1e-9 {
			t.Errorf("energy per accepted token %v", e)
		}
		if e := m[string(KeyEnergyPerStep)].AsFloat64(); math.Abs(e-1000/float64(steps)) > 1e-9 {
			t.Errorf("energy per step %v", e)
		}
		if m["hw.power"].AsFloat64() != 400 {
			t.Errorf("power %v on a 2s window", m["hw.power"])
		}
		checkWindow(t, w.Attrs, w.Start, w.End)
	}
}

func TestMultiGPUArrays(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) {
		g[1].pids, g[3].pids = []uint32{pid}, []uint32{pid}
		g[1].powerMW, g[3].powerMW = 300000, 700000
	})
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	run(s, f, c, 30, 300)
	start := c.t.Add(-2 * time.Second)
	kvs := s.StageAttrs(pid, start, start.Add(time.Second))
	m := attrMap(kvs)
	ids := m["hw.id"].AsStringSlice()
	if len(ids) != 2 || ids[0] != f.Devices[1].(*server.Device).UUID || ids[1] != f.Devices[3].(*server.Device).UUID {
		t.Errorf("hw.id %v", ids)
	}
	if p := m["hw.power"].AsFloat64Slice(); len(p) != 2 || p[0] != 300 || p[1] != 700 {
		t.Errorf("hw.power %v", p)
	}
	if d := m[string(KeyWindowDuration)].AsFloat64Slice(); len(d) != 2 {
		t.Errorf("window durations %v", d)
	}
	// A batched call asks again with the same interval: the same answer.
	if again := s.StageAttrs(pid, start, start.Add(time.Second)); &again[0] != &kvs[0] {
		t.Error("the repeated interval was computed again")
	}
}

func TestCounters(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[0].pids = []uint32{pid}; g[0].throttle = 0x4 | 0x1 })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	s.KeepCounters()
	run(s, f, c, 10, 400)
	n := map[string]int{}
	for _, ct := range s.TakeCounters() {
		n[ct.Track]++
		if ct.Track == "GPU 0 throttled" && ct.Value != 4 {
			t.Errorf("throttled %v, want 4 (sw_power_cap, idle left out)", ct.Value)
		}
		if ct.Track == "GPU 0 power" && (ct.Value != 400 || ct.Unit != "W") {
			t.Errorf("power %v %s", ct.Value, ct.Unit)
		}
	}
	for track, want := range map[string]int{"GPU 0 power": 10, "GPU 0 utilization": 10, "GPU 0 SM clock": 10,
		"GPU 0 memory used": 1, "GPU 0 SM activity": 2, "GPU 0 throttled": 10} {
		if n[track] != want {
			t.Errorf("%s: %d readings, want %d (%v)", track, n[track], want, n)
		}
	}
	if again := s.TakeCounters(); len(again) != 0 {
		t.Errorf("%d readings given twice", len(again))
	}
}

func TestCostLine(t *testing.T) {
	l := costLine(map[string]CallStat{
		"DeviceGetTotalEnergyConsumption": {Calls: 10, Total: 40 * time.Millisecond, Max: 12 * time.Millisecond},
		"DeviceGetPowerUsage":             {Calls: 10, Total: 100 * time.Microsecond, Max: 20 * time.Microsecond},
	})
	want := "NVML cost: 20 calls, 40.1ms in all; DeviceGetTotalEnergyConsumption 10 calls mean 4ms max 12ms; DeviceGetPowerUsage 10 calls mean 10µs max 20µs"
	if l != want {
		t.Errorf("cost line\n got %q\nwant %q", l, want)
	}
}
