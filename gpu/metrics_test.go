//go:build cgo

package gpu

import (
	"bytes"
	"context"
	"math"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/semconv/v1.43.0/hwconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

type point struct {
	unit  string
	value float64
	attrs attribute.Set
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{m.Unit, p.Value, p.Attributes})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{m.Unit, float64(p.Value), p.Attributes})
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{m.Unit, p.Value, p.Attributes})
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{m.Unit, float64(p.Value), p.Attributes})
				}
			}
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[2].pids = []uint32{pid}; g[2].util = 80; g[2].throttle = 0x4 })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := RegisterMetrics(mp.Meter("test"), s)
	if err != nil {
		t.Fatal(err)
	}
	run(s, f, c, 5, 400)
	m.ObserveSpec(30, 40, 10)
	collect(t, reader)    // the first collection sets the energy baseline
	run(s, f, c, 10, 400) // 1s at 400W: 400 J
	m.ObserveSpec(30+80, 40+100, 10+20)
	got := collect(t, reader)

	uuid := f.Devices[2].(*server.Device).UUID
	want := map[string]struct {
		unit  string
		value float64
	}{
		"hw.gpu.utilization":                        {"1", 0.8},
		"hw.gpu.memory.usage":                       {"By", 40 << 30},
		"hw.gpu.memory.limit":                       {"By", float64(f.Devices[2].(*server.Device).MemoryInfo.Total)},
		"hw.gpu.memory.utilization":                 {"1", float64(40<<30) / float64(f.Devices[2].(*server.Device).MemoryInfo.Total)},
		"hw.power":                                  {"W", 400},
		"hw.energy":                                 {"J", 1000 + 15*40},
		"hw.temperature":                            {"Cel", 50},
		"specprobe.gpu.clock.sm":                    {"MHz", 1980},
		"specprobe.gpu.clock.memory":                {"MHz", 2619},
		"specprobe.gpu.memory.activity":             {"1", 0.2},
		"specprobe.gpu.sm_activity":                 {"1", 0},
		"specprobe.spec.acceptance_rate":            {"1", 0.8},
		"specprobe.spec.accepted_tokens_per_verify": {"{token}", 4},
		"specprobe.spec.energy_per_accepted_token":  {"J/{token}", 5},
	}
	// Where OpenTelemetry's hardware conventions name a metric, the name
	// and unit are theirs.
	for _, c := range []struct{ name, unit string }{
		{hwconv.Power{}.Name(), hwconv.Power{}.Unit()},
		{hwconv.Energy{}.Name(), hwconv.Energy{}.Unit()},
		{hwconv.Temperature{}.Name(), hwconv.Temperature{}.Unit()},
	} {
		if w, ok := want[c.name]; !ok || w.unit != c.unit {
			t.Errorf("semantic conventions: %s in %s, we export %v", c.name, c.unit, w)
		}
	}
	for name, w := range want {
		ps := got[name]
		if len(ps) != 1 {
			t.Errorf("%s: %d points, want 1", name, len(ps))
			continue
		}
		if ps[0].unit != w.unit || math.Abs(ps[0].value-w.value) > 1e-9 {
			t.Errorf("%s = %v %s, want %v %s", name, ps[0].value, ps[0].unit, w.value, w.unit)
		}
		if name[:3] == "hw." {
			if v, _ := ps[0].attrs.Value("hw.id"); v.AsString() != uuid {
				t.Errorf("%s: hw.id %v", name, v)
			}
			if v, _ := ps[0].attrs.Value("hw.type"); v.AsString() != "gpu" {
				t.Errorf("%s: hw.type %v", name, v)
			}
		}
	}
	active := map[string]float64{}
	for _, p := range got["specprobe.gpu.throttle"] {
		v, _ := p.attrs.Value("specprobe.gpu.throttle_reason")
		active[v.AsString()] = p.value
	}
	if active["sw_power_cap"] != 1 || active["hw_slowdown"] != 0 || len(active) != len(throttleNames) {
		t.Errorf("throttle %v", active)
	}
}

// TestMetricsWithoutGPU: the speculative-decoding metrics do not need a GPU.
func TestMetricsWithoutGPU(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := RegisterMetrics(mp.Meter("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveSpec(3, 4, 1)
	got := collect(t, reader)
	if len(got["specprobe.spec.acceptance_rate"]) != 1 || len(got["hw.power"]) != 0 || len(got["specprobe.spec.energy_per_accepted_token"]) != 0 {
		t.Errorf("metrics %v", got)
	}
}
