//go:build cgo

package tracer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"github.com/specprobe/specprobe/export"
	"go.opentelemetry.io/otel/attribute"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

// traceDemo traces the demo target for a moment with sampler s and returns
// the log, the spans and the metric names collected at the end; the Perfetto
// trace is written to perfettoPath.
func traceDemo(t *testing.T, s func(pid int) *gpu.Sampler) (string, *tracer.Result, []sdktrace.ReadOnlySpan, map[string]bool) {
	return traceDemoTo(t, s, filepath.Join(t.TempDir(), "trace.json"))
}

func traceDemoTo(t *testing.T, s func(pid int) *gpu.Sampler, perfettoPath string) (string, *tracer.Result, []sdktrace.ReadOnlySpan, map[string]bool) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: attaches BPF probes to the demo target")
	}
	if err := loader.CheckPrivileges(); err != nil {
		t.Skipf("needs root or CAP_BPF+CAP_PERFMON: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	if out, err := exec.Command("make", "-C", root, "--no-print-directory", "demo/specdemo").CombinedOutput(); err != nil {
		t.Fatalf("building the demo target: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(root, "demo", "specdemo"), "--threads", "2", "--requests", "1000000")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); !strings.HasPrefix(line, "ready") {
		t.Fatalf("demo target: %q", line)
	}
	spec, err := probes.Lookup("demo")
	if err != nil {
		t.Fatal(err)
	}
	mem := tracetest.NewInMemoryExporter()
	metrics := &metricNames{names: map[string]bool{}}
	reader := sdkmetric.NewPeriodicReader(metrics, sdkmetric.WithInterval(time.Hour)) // exports at shutdown
	var log bytes.Buffer
	pf, err := os.Create(perfettoPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tracer.Run(context.Background(), tracer.Config{
		PID: cmd.Process.Pid, Spec: spec, SkipEndbr: true, Duration: 700 * time.Millisecond, Log: &log,
		Exporters: []tracer.Exporter{{Name: "memory", SpanExporter: keep{mem}}, {Name: "perfetto", Exporter: export.NewPerfetto(pf)}},
		GPU:       s(cmd.Process.Pid), MetricReaders: []sdkmetric.Reader{reader},
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	return log.String(), res, mem.GetSpans().Snapshots(), metrics.names
}

// metricNames is a metric exporter that keeps the names it was given.
type metricNames struct{ names map[string]bool }

func (m *metricNames) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}
func (m *metricNames) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}
func (m *metricNames) Export(_ context.Context, rm *metricdata.ResourceMetrics) error {
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			m.names[x.Name] = true
		}
	}
	return nil
}
func (m *metricNames) ForceFlush(context.Context) error { return nil }
func (m *metricNames) Shutdown(context.Context) error   { return nil }

type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }

func gpuKeys(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, kv := range s.Attributes() {
		if k := string(kv.Key); strings.HasPrefix(k, "hw.") || strings.HasPrefix(k, "specprobe.gpu.") {
			out = append(out, k)
		}
	}
	return out
}

// TestRunWithoutNVML: the real binding on a machine without
// libnvidia-ml.so.1. One line says so, the session traces as always, no span
// carries a GPU field.
func TestRunWithoutNVML(t *testing.T) {
	log, res, spans, _ := traceDemo(t, func(int) *gpu.Sampler { return gpu.Open(gpu.DefaultOptions()) })
	if strings.Contains(log, "GPU state: PID") {
		t.Skip("this machine has NVML")
	}
	var off []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "GPU") && !strings.HasPrefix(l, "  ") && !strings.Contains(l, "CUDA:") { // NVML lines, not the CUDA probes'
			off = append(off, l)
		}
	}
	if len(off) != 1 || !strings.Contains(off[0], "GPU state off") || !strings.Contains(off[0], "libnvidia-ml.so.1") {
		t.Errorf("want one line about NVML at start, got %q in:\n%s", off, log)
	}
	stages := 0
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), "spec_") {
			stages++
			if k := gpuKeys(s); k != nil {
				t.Fatalf("%s carries GPU attributes %v", s.Name(), k)
			}
		}
	}
	if stages == 0 || res.Stats.Steps == 0 {
		t.Fatalf("nothing traced: %d stage spans, %d steps\n%s", stages, res.Stats.Steps, log)
	}
}

// TestRunWithMockGPU: the demo target "uses" GPU 3 of a mock 8xH200. Its
// stages last milliseconds: a stage span carries a GPU value only with a
// window that describes it (within the span stretched by half its length
// each side); gpu_window spans carry the energy of the steps in them, and the
// metrics and the summary include the GPU.
func TestRunWithMockGPU(t *testing.T) {
	var target int
	trace := filepath.Join(t.TempDir(), "trace.json")
	log, _, spans, metrics := traceDemoTo(t, func(pid int) *gpu.Sampler {
		target = pid
		srv := dgxh200.New()
		for i, d := range srv.Devices {
			stubGPU(d.(*server.Device), map[bool]uint32{true: uint32(pid)}[i == 3])
		}
		o := gpu.DefaultOptions()
		o.Interval = 10 * time.Millisecond // many samples in a short run
		o.WindowMin = 200 * time.Millisecond
		return gpu.New(srv, o)
	}, trace)
	if !strings.Contains(log, "GPU state: PID") {
		t.Fatalf("no GPU start line:\n%s", log)
	}
	checkCounterTracks(t, trace, target)
	stages, windows := 0, 0
	for _, s := range spans {
		a := map[string]attribute.Value{}
		for _, kv := range s.Attributes() {
			a[string(kv.Key)] = kv.Value
		}
		switch {
		case strings.HasPrefix(s.Name(), "spec_"):
			stages++
			if len(gpuKeys(s)) == 0 {
				continue
			}
			ws, wd := a[string(gpu.KeyWindowStart)].AsInt64(), a[string(gpu.KeyWindowDuration)].AsFloat64()
			d := s.EndTime().Sub(s.StartTime())
			lo, hi := s.StartTime().Add(-d/2), s.EndTime().Add(d/2)
			w0 := time.Unix(0, ws)
			if ws == 0 || w0.Before(lo) || w0.Add(time.Duration(wd*1e9)).After(hi) {
				t.Errorf("%s of %v carries %v over a window of %gs from %v", s.Name(), d, gpuKeys(s), wd, w0.Sub(s.StartTime()))
			}
		case s.Name() == gpu.GPUWindowSpan:
			windows++
			if a["hw.energy"].AsFloat64() <= 0 || a[string(gpu.KeySteps)].AsInt64() <= 0 || a[string(gpu.KeyEnergyPerStep)].AsFloat64() <= 0 {
				t.Errorf("gpu_window %v: %v", s.EndTime().Sub(s.StartTime()), s.Attributes())
			}
		}
	}
	if stages == 0 || windows == 0 {
		t.Errorf("%d stage spans, %d gpu_window spans", stages, windows)
	}
	for _, m := range []string{"hw.gpu.utilization", "hw.power", "hw.energy", "specprobe.spec.acceptance_rate", "specprobe.spec.energy_per_accepted_token"} {
		if !metrics[m] {
			t.Errorf("metric %s missing (have %v)", m, metrics)
		}
	}
	if !strings.Contains(log, "GPU 3 NVIDIA H200") || !strings.Contains(log, "NVML cost: ") {
		t.Errorf("no GPU or NVML cost line in the summary:\n%s", log)
	}
}

// checkCounterTracks reads the Perfetto JSON back: the mocked GPU's power
// and clock are counter tracks under the traced process.
func checkCounterTracks(t *testing.T, path string, pid int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name, Ph string
			Pid      int
			Args     map[string]any
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range doc.TraceEvents {
		if e.Ph != "C" {
			continue
		}
		n[e.Name]++
		if e.Pid != pid {
			t.Errorf("counter %s under pid %d, want the target's %d", e.Name, e.Pid, pid)
		}
		if (e.Name == "GPU 3 power" && e.Args["W"] != 500.0) || (e.Name == "GPU 3 SM clock" && e.Args["MHz"] != 1980.0) {
			t.Errorf("%s: %v", e.Name, e.Args)
		}
	}
	if n["GPU 3 power"] < 10 || n["GPU 3 SM clock"] < 10 || n["GPU 3 utilization"] < 10 {
		t.Errorf("counter tracks %v: want power, SM clock and utilisation every 10ms", n)
	}
}

// stubGPU gives a mock device the state calls the sampler makes; pid 0 means
// no process on it. The energy counter runs at 500 W.
func stubGPU(d *server.Device, pid uint32) {
	t0 := time.Now()
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if pid == 0 {
			return nil, nvml.SUCCESS
		}
		return []nvml.ProcessInfo{{Pid: pid}}, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 90, Memory: 40}, nvml.SUCCESS }
	d.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 1980, nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 500000, nvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return uint64(time.Since(t0).Milliseconds()) * 500, nvml.SUCCESS }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 55, nvml.SUCCESS }
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.SUCCESS }
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) { return nvml.GpmSupport{}, nvml.SUCCESS }
}
