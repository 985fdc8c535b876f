package main

import (
	"context"

	"github.com/spf13/pflag"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/tracer"
)

// gpuFlags are attach's GPU state and metrics flags.
type gpuFlags struct {
	off     bool
	opts    gpu.Options
	metrics string
}

func addGPUFlags(f *pflag.FlagSet) *gpuFlags {
	g := &gpuFlags{opts: gpu.DefaultOptions()}
	f.BoolVar(&g.off, "no-gpu", false, "do not sample GPU state through NVML")
	f.DurationVar(&g.opts.Interval, "gpu-interval", g.opts.Interval, "sample GPU utilisation, memory, clocks, power, energy and throttling this often (>= 10ms)")
	f.DurationVar(&g.opts.ProcessInterval, "gpu-process-interval", g.opts.ProcessInterval, "look for the GPUs the process uses, and read temperature, this often (>= 1s)")
	f.DurationVar(&g.opts.GPMInterval, "gpu-gpm-interval", g.opts.GPMInterval, "sample SM activity, occupancy and tensor activity (GPM, Hopper+) this often (> 100ms)")
	f.DurationVar(&g.opts.EnergyInterval, "gpu-energy-interval", g.opts.EnergyInterval, "read the energy counter (a slow NVML call) this often (>= 100ms, the counter's own period)")
	f.DurationVar(&g.opts.MemoryInterval, "gpu-memory-interval", g.opts.MemoryInterval, "read GPU memory used (a slow NVML call) this often (>= 100ms)")
	f.DurationVar(&g.opts.WindowMin, "gpu-window", g.opts.WindowMin, "gpu_window spans (energy per step and per accepted token): at least this long (>= 1s)")
	f.StringVar(&g.metrics, "metrics-exporter", "", "where metrics go: "+export.MetricNames()+" (default: OTLP when spans go to OTLP or OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT is set)")
	return g
}

// check refuses intervals out of range before anything is opened or
// attached; with --no-gpu too: a negative interval is a mistake either way.
func (g *gpuFlags) check() error { return g.opts.Validate() }

// apply sets the sampler and metric readers of cfg; spanExporters are the
// --exporter values, whose OTLP protocol the metrics follow.
func (g *gpuFlags) apply(ctx context.Context, cfg *tracer.Config, spanExporters []string) error {
	if !g.off {
		cfg.GPU = gpu.Open(g.opts)
	}
	r, err := export.MetricReader(ctx, g.metrics, spanExporters)
	if r != nil {
		cfg.MetricReaders = []sdkmetric.Reader{r}
	}
	return err
}
