package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Estimated target CPU per event, from `make bench` on this project's VM
// (BENCHMARKS.md): a uprobe hit with its ring-buffer write, and half of a
// watched Python call (entry and exit are one event each).
const (
	uprobeEventCost = 1200 * time.Nanosecond
	watchEventCost  = 20 * time.Microsecond
)

// Totals is what the daemon has counted, over ended and running sessions.
type Totals struct {
	Attached                 int
	Attaches, AttachFailures uint64
	Detaches, Discovered     uint64
	SkippedAtLimit           uint64
	// Rescans counts the full reads of /proc after the first.
	Rescans uint64
	// Rejected counts, by reason, the processes not traced (work.go).
	Rejected                   map[string]uint64
	Events, KernelDrops        uint64
	ExecDrops                  uint64
	SpansExported, SpansFailed uint64
	SpansDropped               uint64
	// SpansShed counts, of SpansDropped, the spans the span queues' share of
	// memory_limit had no room for; QueuedBytes is what they hold now.
	SpansShed    uint64
	QueuedBytes  int64
	ProbeCost    time.Duration
	SamplingRate float64
}

// newMeter registers the daemon's own metrics: on the Prometheus registry
// served at /metrics, and on any other reader (OTLP).
func newMeter(snapshot func() Totals, readers []sdkmetric.Reader) (*sdkmetric.MeterProvider, *prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	prom, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	opts := []sdkmetric.Option{sdkmetric.WithReader(prom),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "specprobe"), attribute.String("host.name", host)))}
	for _, r := range readers {
		opts = append(opts, sdkmetric.WithReader(r))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	m := mp.Meter("github.com/specprobe/specprobe/daemon")
	type counter struct {
		name, desc string
		unit       string
		get        func(Totals) float64
	}
	counters := []counter{
		{"specprobe.daemon.attaches", "processes attached", "", func(t Totals) float64 { return float64(t.Attaches) }},
		{"specprobe.daemon.attach_failures", "processes that matched a spec but could not be attached", "", func(t Totals) float64 { return float64(t.AttachFailures) }},
		{"specprobe.daemon.detaches", "sessions ended", "", func(t Totals) float64 { return float64(t.Detaches) }},
		{"specprobe.daemon.discovered", "processes examined (scan and execs)", "", func(t Totals) float64 { return float64(t.Discovered) }},
		{"specprobe.daemon.skipped", "matching processes not attached because max_processes were traced", "", func(t Totals) float64 { return float64(t.SkippedAtLimit) }},
		{"specprobe.events", "probe events read", "", func(t Totals) float64 { return float64(t.Events) }},
		{"specprobe.drops.kernel", "probe events lost in the kernel (ring buffer full)", "", func(t Totals) float64 { return float64(t.KernelDrops) }},
		{"specprobe.drops.exec", "exec notifications lost (the daemon rescans /proc)", "", func(t Totals) float64 { return float64(t.ExecDrops) }},
		{"specprobe.spans.exported", "spans exported", "", func(t Totals) float64 { return float64(t.SpansExported) }},
		{"specprobe.spans.failed", "spans the exporter failed to deliver", "", func(t Totals) float64 { return float64(t.SpansFailed) }},
		{"specprobe.spans.dropped", "spans dropped by a full export queue", "", func(t Totals) float64 { return float64(t.SpansDropped) }},
		{"specprobe.spans.dropped.memory", "of the spans dropped, those the span queues' share of memory_limit had no room for", "", func(t Totals) float64 { return float64(t.SpansShed) }},
		{"specprobe.probe.cost", "estimated CPU time the probes took from the targets (events x cost per event measured by make bench)", "s", func(t Totals) float64 { return t.ProbeCost.Seconds() }},
	}
	var insts []metric.Observable
	obs := map[metric.Observable]func(Totals) float64{}
	for _, c := range counters {
		opts := []metric.Float64ObservableCounterOption{metric.WithDescription(c.desc)}
		if c.unit != "" {
			opts = append(opts, metric.WithUnit(c.unit))
		}
		inst, err := m.Float64ObservableCounter(c.name, opts...)
		if err != nil {
			return nil, nil, err
		}
		insts = append(insts, inst)
		obs[inst] = c.get
	}
	attached, err := m.Int64ObservableGauge("specprobe.daemon.processes", metric.WithDescription("processes traced now"))
	if err != nil {
		return nil, nil, err
	}
	rate, err := m.Float64ObservableGauge("specprobe.sampling.rate", metric.WithDescription("fraction of new requests kept under the event budget"))
	if err != nil {
		return nil, nil, err
	}
	rss, err := m.Int64ObservableGauge("specprobe.daemon.memory.rss", metric.WithDescription("resident memory of the daemon"), metric.WithUnit("By"))
	if err != nil {
		return nil, nil, err
	}
	rejected, err := m.Float64ObservableCounter("specprobe.daemon.rejected",
		metric.WithDescription("processes not traced, by reason: a look that ran past its deadline or read budget, a forged file, a selector, a cap"))
	if err != nil {
		return nil, nil, err
	}
	queued, err := m.Int64ObservableGauge("specprobe.daemon.queued", metric.WithDescription("bytes of spans waiting for the exporters (as the queues count them against memory_limit)"), metric.WithUnit("By"))
	if err != nil {
		return nil, nil, err
	}
	heap, err := m.Int64ObservableGauge("specprobe.daemon.memory.heap_live", metric.WithDescription("the Go heap the last collection found live (the span queues' bytes are in it)"), metric.WithUnit("By"))
	if err != nil {
		return nil, nil, err
	}
	insts = append(insts, attached, rate, rss, rejected, queued, heap)
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		t := snapshot()
		for inst, get := range obs {
			o.ObserveFloat64(inst.(metric.Float64Observable), get(t))
		}
		o.ObserveInt64(attached, int64(t.Attached))
		o.ObserveFloat64(rate, t.SamplingRate)
		o.ObserveInt64(rss, selfRSS())
		o.ObserveInt64(queued, t.QueuedBytes)
		o.ObserveInt64(heap, liveHeap())
		for reason, n := range t.Rejected {
			o.ObserveFloat64(rejected, float64(n), metric.WithAttributes(attribute.String("reason", reason)))
		}
		return nil
	}, insts...)
	if err != nil {
		return nil, nil, err
	}
	return mp, reg, nil
}

// liveHeap is the heap the last garbage collection found live, in bytes.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// selfRSS is the daemon's resident memory in bytes (/proc/self/statm).
func selfRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// handler serves /metrics, /healthz (the main loop turned recently),
// /readyz (the first scan is done and execs are watched) and, with
// targets, /targets (JSON): that one names the processes traced and their
// pods, and is served on the local listener only.
func (d *Daemon) handler(reg *prometheus.Registry, targets bool) http.Handler {
	mux := http.NewServeMux()
	// /metrics and /targets build their answer in memory: a few at a time,
	// whoever asks, so that clients cannot take the daemon past its limit.
	busy := make(chan struct{}, maxAnswering)
	// OpenMetrics when the scraper asks for it: the format that carries
	// exemplars (the trace of a slow step on the duration histograms).
	mux.Handle("/metrics", fewAtOnce(busy, promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if last := time.Unix(0, d.lastLoop.Load()); time.Since(last) > 5*time.Second {
			http.Error(w, fmt.Sprintf("main loop stalled since %s", last.Format(time.RFC3339)), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !d.ready.Load() {
			http.Error(w, "starting: first /proc scan not done", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if !targets {
		return mux
	}
	mux.Handle("/targets", fewAtOnce(busy, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.Targets())
	})))
	return mux
}

// maxAnswering is how many /metrics and /targets requests a listener
// answers at once; a scraper or two, and someone looking.
const maxAnswering = 4

// fewAtOnce serves a request when one of busy's slots is free, else
// answers 503 at once (try again in a second) rather than queue it.
func fewAtOnce(busy chan struct{}, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case busy <- struct{}{}:
			defer func() { <-busy }()
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy: too many /metrics and /targets requests at once", http.StatusServiceUnavailable)
		}
	})
}
