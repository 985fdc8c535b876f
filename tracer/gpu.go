package tracer

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/specmetrics"
)

// gpuSession is the GPU side of a session (gpu/): the sampler on its own
// goroutine, its windows on the stage spans, and the metrics. Every method is
// a no-op where GPU state or metrics are off.
type gpuSession struct {
	s    *gpu.Sampler // nil unless started
	mp   *sdkmetric.MeterProvider
	m    *gpu.Metrics
	spec *specmetrics.Target // the session's speculative-decoding metrics
}

func startGPU(cfg Config, ranks []probes.RankValue) *gpuSession {
	g := &gpuSession{}
	if cfg.GPU != nil && cfg.GPU.Start(cfg.PID, cfg.Log) {
		g.s = cfg.GPU
	}
	if len(cfg.MetricReaders) == 0 {
		return g
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(processResource(cfg, ranks))}
	for _, r := range cfg.MetricReaders {
		opts = append(opts, sdkmetric.WithReader(r))
	}
	g.mp = sdkmetric.NewMeterProvider(opts...)
	meter := g.mp.Meter("github.com/specprobe/specprobe")
	if sm, err := specmetrics.New(meter); err == nil {
		g.spec = sm.Target(cfg.Spec.Engine, cfg.PID, cfg.Resource...)
	} else {
		fmt.Fprintf(cfg.Log, "specprobe: speculative-decoding metrics off: %v\n", err)
	}
	m, err := gpu.RegisterMetrics(meter, g.s)
	if err != nil {
		fmt.Fprintf(cfg.Log, "specprobe: metrics off: %v\n", err)
		return g
	}
	g.m = m
	return g
}

// attach puts the GPU window on each stage span and GPU columns on the live line.
func (g *gpuSession) attach(sink *spanbuilder.OTelSink, live *liveSummary) {
	if g.s != nil {
		sink.StageAttrs = g.s.StageAttrs
		live.gpu = g.s
	}
}

func (g *gpuSession) observe(st *spanbuilder.Stats) {
	g.m.ObserveSpec(st.Accepted, st.Drafted(), st.Verifies)
}

// stop ends sampling and flushes the metrics within ctx. A metrics export
// that fails (collector down) is reported, not returned: spans are what the
// run is for.
func (g *gpuSession) stop(ctx context.Context, st *spanbuilder.Stats, cfg Config) []string {
	g.s.Stop()
	if g.mp != nil {
		g.observe(st)
		if err := g.mp.Shutdown(ctx); err != nil {
			fmt.Fprintf(cfg.Log, "specprobe: exporting metrics: %v\n", err)
		}
	}
	return cfg.GPU.SummaryLines()
}
