package tracer

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
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
	// Exporters that draw GPU counter tracks (Perfetto), fed each tick.
	counters []export.CounterSink
	pid      int64
}

func startGPU(cfg Config, ranks []probes.RankValue) *gpuSession {
	g := &gpuSession{pid: int64(cfg.PID)}
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

// attach puts the GPU values that describe a stage on its span, counts the
// steps for the gpu_window spans, and puts GPU columns on the live line.
func (g *gpuSession) attach(sink *spanbuilder.OTelSink, live *liveSummary, exps []*export.QueueProcessor) {
	if g.s == nil {
		return
	}
	sink.StageAttrs = g.s.StageAttrs
	live.gpu = g.s
	prev := sink.OnStep
	sink.OnStep = func(st *spanbuilder.Step, tr spanrec.TraceID, loop spanrec.SpanID, kept bool) {
		if prev != nil {
			prev(st, tr, loop, kept)
		}
		g.s.ObserveStep(st.PID, st.TID, st.Start, st.End, acceptedOf(st))
	}
	for _, e := range exps {
		if cs, ok := e.Exporter().(export.CounterSink); ok {
			g.counters = append(g.counters, cs)
		}
	}
	if len(g.counters) > 0 {
		g.s.KeepCounters()
	}
}

// acceptedOf is a step's accepted drafts as its verify read them, -1 for none.
func acceptedOf(st *spanbuilder.Step) int64 {
	n := int64(-1)
	for _, c := range st.Calls {
		for _, v := range c.Values {
			if c.Stage == spanschema.Verify && v.Name == spanschema.ValueCorrect {
				n = max(n, 0) + v.V
			}
		}
	}
	return n
}

// tick hands on the gpu_window spans closed by now and the GPU counter
// readings so far.
func (g *gpuSession) tick(sink *spanbuilder.OTelSink, now time.Time) {
	if g.s == nil {
		return
	}
	for _, w := range g.s.TakeWindows(now) {
		sink.Window(gpu.GPUWindowSpan, w.Start, w.End, w.Attrs)
	}
	if len(g.counters) == 0 {
		return
	}
	var cs []export.Counter
	for _, c := range g.s.TakeCounters() {
		cs = append(cs, export.Counter{Pid: g.pid, Track: c.Track, Unit: c.Unit, At: c.At.UnixNano(), Value: c.Value})
	}
	for _, sink := range g.counters {
		sink.AddCounters(cs)
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
