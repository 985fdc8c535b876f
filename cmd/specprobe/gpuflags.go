package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

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
	f.StringVar(&g.metrics, "metrics-exporter", "", "where metrics go: otlp, otlp-grpc, otlp-http or none (default: OTLP when spans go to OTLP or OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT is set)")
	return g
}

// apply sets the sampler and metric readers of cfg; spanExporters are the
// --exporter values, whose OTLP protocol the metrics follow.
func (g *gpuFlags) apply(ctx context.Context, cfg *tracer.Config, spanExporters []string) error {
	if !g.off {
		if err := g.opts.Validate(); err != nil {
			return err
		}
		cfg.GPU = gpu.Open(g.opts)
	}
	r, err := metricReader(ctx, g.metrics, spanExporters)
	if r != nil {
		cfg.MetricReaders = []sdkmetric.Reader{r}
	}
	return err
}

// metricReader is the OTLP metric reader that name asks for; with name "",
// OTLP when spans go to OTLP or an OTLP endpoint is set; nil for none.
func metricReader(ctx context.Context, name string, spanExporters []string, opts ...sdkmetric.PeriodicReaderOption) (sdkmetric.Reader, error) {
	if name == "" {
		for _, e := range spanExporters {
			if e == "otlp" || e == "otlp-grpc" || e == "otlp-http" {
				name = e
			}
		}
		if name == "" && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "") {
			name = "otlp"
		}
	}
	proto, ok := map[string]string{"otlp": "", "otlp-grpc": "grpc", "otlp-http": "http/protobuf"}[strings.TrimSpace(name)]
	switch {
	case name == "" || name == "none":
		return nil, nil
	case !ok:
		return nil, fmt.Errorf("unknown metrics exporter %q (have: otlp, otlp-grpc, otlp-http, none)", name)
	}
	r, err := gpu.NewOTLPReader(ctx, proto, opts...)
	if err != nil {
		return nil, fmt.Errorf("metrics exporter %s: %w", name, err)
	}
	return r, nil
}
