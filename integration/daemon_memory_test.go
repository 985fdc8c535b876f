package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/specprobe/specprobe/daemon"
)

// TestDaemonMemory16Targets runs the daemon as the DaemonSet does (in a
// memory cgroup capped at the container's limits.memory; its memory_limit,
// GOMEMLIMIT and max_processes; spans over OTLP/gRPC) while it traces 16
// busy native targets at once, and wants every event read, no OOM kill, and
// both the cgroup's peak and the daemon's peak resident memory (VmHWM, which
// counts the ring buffers twice, as the reader maps them) under the limit.
func TestDaemonMemory16Targets(t *testing.T) {
	needRoot(t)
	const targets = 16
	limit, cfg := daemonSetMemory(t), daemonSetConfig(t)
	if cfg.MaxProcesses < targets {
		t.Fatalf("the DaemonSet's max_processes %d is under the %d targets of this test", cfg.MaxProcesses, targets)
	}
	cg := newMemCgroup(t, limit)
	collector := dropCollector(t)
	d := startDaemonAs(t, cg.wrapper(), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + collector, "OTEL_EXPORTER_OTLP_INSECURE=true", "GOMEMLIMIT=" + cfg.MemoryLimit},
		"--exporter", "otlp-grpc", "--engine", "demo", "--metrics-exporter", "none",
		"--memory-limit", cfg.MemoryLimit, "--max-processes", strconv.Itoa(cfg.MaxProcesses))
	demos := busyTargets(t, d, targets, "400")
	want := 0
	for _, dm := range demos {
		waitExit(t, dm, 0)
		want += 2 * len(readTruth(t, dm.log))
	}
	d.waitFor(t, "every detach", func() bool { return d.metric("specprobe_daemon_detaches_total") == targets })
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	kB := func(field string) int64 {
		v, ok := statusBytes(status, field)
		if !ok {
			t.Fatalf("no %s in /proc/PID/status", field)
		}
		return v
	}
	peak := kB("VmHWM")
	events, drops := d.metric("specprobe_events_total"), d.metric("specprobe_drops_kernel_total")
	const MiB = 1 << 20
	t.Logf("%d targets, %v events (%v lost in the kernel), %v spans exported, %v dropped at full queues; daemon peak RSS %.1f MiB (%.1f MiB a target), now %.1f MiB anonymous, %.1f MiB file; cgroup peak %.1f MiB; limit %.0f MiB",
		targets, events, drops, d.metric("specprobe_spans_exported_total"), d.metric("specprobe_spans_dropped_total"),
		float64(peak)/MiB, float64(peak)/MiB/targets, float64(kB("RssAnon"))/MiB, float64(kB("RssFile"))/MiB, float64(cg.peak())/MiB, float64(limit)/MiB)
	if peak >= limit || cg.peak() >= limit || cg.oomKills() > 0 {
		t.Errorf("daemon peak RSS %.1f MiB, cgroup peak %.1f MiB, %d OOM kills: over the DaemonSet's memory limit %.0f MiB",
			float64(peak)/MiB, float64(cg.peak())/MiB, cg.oomKills(), float64(limit)/MiB)
	}
	if events+drops != float64(want) || drops != 0 {
		t.Errorf("%v events read and %v lost in the kernel; the targets made %d", events, drops, want)
	}
	d.stop(t)
}

// daemonSetConfig is the daemon's config in the DaemonSet's ConfigMap.
func daemonSetConfig(t *testing.T) daemon.Config {
	t.Helper()
	path := filepath.Join(repoRoot(t), "deploy", "kubernetes", "specprobe.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(raw), -1) {
		if !strings.Contains(doc, "\nkind: ConfigMap") {
			continue
		}
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
			t.Fatalf("%s: the ConfigMap: %v", path, err)
		}
		cfg, err := daemon.ParseConfig([]byte(cm.Data["config.yaml"]), "config.yaml")
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if cfg.MemoryLimit == "" {
			t.Fatalf("%s: the config sets no memory_limit", path)
		}
		return cfg
	}
	t.Fatalf("%s: no ConfigMap", path)
	return daemon.Config{}
}

// dropCollector is an OTLP/gRPC collector that drops what it gets: the
// daemon pays for encoding and sending, the test keeps nothing.
func dropCollector(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, dropTraces{})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

type dropTraces struct {
	collectortrace.UnimplementedTraceServiceServer
}

func (dropTraces) Export(context.Context, *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// statusBytes reads a "Field:  N kB" line of /proc/PID/status, in bytes.
func statusBytes(status []byte, field string) (int64, bool) {
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(status)
	if m == nil {
		return 0, false
	}
	v, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return v << 10, true
}

// TestDaemonMemoryStalledCollector holds memory_limit with every target
// busy and a collector that accepts the connection and never reads (over
// OTLP/gRPC, then OTLP/HTTP), while 16 clients keep asking for /metrics and
// /targets: the daemon's VmRSS, sampled through the run, and its peak
// (VmHWM) stay under the limit, the span queues never hold more than their
// share, and the spans shed for it are counted on /metrics, /targets and
// the detach lines.
func TestDaemonMemoryStalledCollector(t *testing.T) {
	needRoot(t)
	for _, exporter := range []string{"otlp-grpc", "otlp-http"} {
		t.Run(exporter, func(t *testing.T) { stalledCollector(t, exporter) })
	}
}

func stalledCollector(t *testing.T, exporter string) {
	const (
		targets = 6
		limit   = 96 << 20
		queues  = limit / 4 // the span queues' share, one exporter
		busyFor = 12 * time.Second
		clients = 16
		MiB     = 1 << 20
	)
	// The clients ask on listen; the test reads /metrics on metrics_listen,
	// whose answers are not shared with them.
	metricsAddr := freeAddr(t)
	d := startDaemonAs(t, nil, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + blackhole(t), "OTEL_EXPORTER_OTLP_INSECURE=true"},
		"--exporter", exporter, "--engine", "demo", "--metrics-exporter", "none", "--metrics-listen", metricsAddr,
		"--memory-limit", "96MiB", "--max-processes", "8", "--flush-timeout", "2s")
	own := &daemonCLI{proc: d.proc, base: "http://" + metricsAddr}
	rss := watchRSS(t, d.cmd.Process.Pid)
	demos := busyTargets(t, d, targets, "1000000")
	stopClients := askAll(d, clients)
	own.waitFor(t, "spans shed for the memory limit", func() bool { return own.metric("specprobe_spans_dropped_memory_total") > 0 })
	var queuedMax, heapMax float64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(busyFor); time.Now().Before(end); <-tick.C {
		queuedMax = max(queuedMax, own.metric("specprobe_daemon_queued_bytes"))
		heapMax = max(heapMax, own.metric("specprobe_daemon_memory_heap_live_bytes"))
	}
	served, busy := stopClients()
	shedOnTargets := targetsShed(d) // while the targets are traced: /targets lists only those
	for _, dm := range demos {
		_ = dm.cmd.Process.Signal(syscall.SIGTERM) // the demo ends its step and exits
	}
	for _, dm := range demos {
		waitExit(t, dm, 0)
	}
	own.waitFor(t, "every detach", func() bool { return own.metric("specprobe_daemon_detaches_total") == targets })
	shed, dropped := own.metric("specprobe_spans_dropped_memory_total"), own.metric("specprobe_spans_dropped_total")
	sampled, peak := rss()
	t.Logf("%s: %d targets for %s, %v events, %v spans dropped, %v of them for the memory limit; queued at most %.1f MiB (share %.0f MiB), live heap at most %.1f MiB; %d answers to %d clients, %d busy; VmRSS sampled at most %.1f MiB, VmHWM %.1f MiB; limit %.0f MiB",
		exporter, targets, busyFor, own.metric("specprobe_events_total"), dropped, shed, queuedMax/MiB, float64(queues)/MiB, heapMax/MiB,
		served, clients, busy, float64(sampled)/MiB, float64(peak)/MiB, float64(limit)/MiB)
	if sampled >= limit || peak >= limit {
		t.Errorf("VmRSS sampled at most %.1f MiB, VmHWM %.1f MiB: over memory_limit %.0f MiB", float64(sampled)/MiB, float64(peak)/MiB, float64(limit)/MiB)
	}
	if queuedMax > queues || queuedMax <= 0 {
		t.Errorf("span queues held at most %.1f MiB; want some, within their share %.0f MiB", queuedMax/MiB, float64(queues)/MiB)
	}
	// The queues' bound holds the heap, not the Go limit's collections:
	// what is live is the queues' share and, within an eighth of the limit,
	// the rest (the sessions' state, the exports in flight: ~5 MiB here).
	// A Cost under what spans take fails this first (SpanOverhead 100
	// instead of 512: 45 MiB live), while the Go limit still keeps VmRSS
	// under the limit.
	if heapMax >= queues+limit/8 || heapMax <= 0 {
		t.Errorf("live heap at most %.1f MiB: want it within the queues' share and an eighth of the limit, %.0f MiB", heapMax/MiB, float64(queues+limit/8)/MiB)
	}
	if shed <= 0 || shed > dropped || shedOnTargets == 0 {
		t.Errorf("%v spans shed for the memory limit of %v dropped, %d on /targets: want some shed, counted on both", shed, dropped, shedOnTargets)
	}
	if !regexp.MustCompile(`detached from PID \d+ .* spans dropped, [1-9]\d* of them for the memory limit`).MatchString(d.out.String()) {
		t.Errorf("no detach line counts spans shed for the memory limit:\n%s", d.out.String())
	}
	if served == 0 {
		t.Error("no client got an answer from /metrics or /targets")
	}
	d.stop(t)
}

// freeAddr is a local address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// blackhole is a collector that accepts connections and never reads them.
func blackhole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// watchRSS samples the process's VmRSS every 20 ms until the returned
// function is called, which says the most it saw and the process's VmHWM.
func watchRSS(t *testing.T, pid int) func() (sampled, peak int64) {
	var mu sync.Mutex
	var sampled, peak int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				rss, _ := statusBytes(status, "VmRSS")
				hwm, _ := statusBytes(status, "VmHWM")
				mu.Lock()
				sampled, peak = max(sampled, rss), max(peak, hwm)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop := func() (int64, int64) {
		once.Do(func() { close(done); <-stopped })
		mu.Lock()
		defer mu.Unlock()
		return sampled, peak
	}
	t.Cleanup(func() { stop() })
	return stop
}

// askAll has n clients ask the daemon for /metrics and /targets in turn,
// each every 100 ms, until the returned function is called, which says how
// many were answered and how many found it busy.
func askAll(d *daemonCLI, n int) func() (served, busy int) {
	var servedN, busyN atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			paths := []string{"/metrics", "/targets"}
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for j := i; ; j++ {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				switch code, _ := d.get(paths[j%2]); code {
				case http.StatusOK:
					servedN.Add(1)
				case http.StatusServiceUnavailable:
					busyN.Add(1)
				}
			}
		})
	}
	return func() (int, int) {
		close(done)
		wg.Wait()
		return int(servedN.Load()), int(busyN.Load())
	}
}

// targetsShed sums /targets' spans_dropped_memory.
func targetsShed(d *daemonCLI) uint64 {
	_, body := d.get("/targets")
	var ts []struct {
		Shed uint64 `json:"spans_dropped_memory"`
	}
	_ = json.Unmarshal([]byte(body), &ts)
	var n uint64
	for _, x := range ts {
		n += x.Shed
	}
	return n
}

// busyTargets starts n demo targets (2 threads, batches of 4, requests
// requests), waits for the daemon to attach them all and releases them.
func busyTargets(t *testing.T, d *daemonCLI, n int, requests string) []*demo {
	t.Helper()
	bin := demoBinary(t, "specdemo-cet")
	var demos []*demo
	for range n {
		demos = append(demos, startDemo(t, bin, "--threads", "2", "--batch", "4", "--requests", requests))
	}
	d.waitFor(t, fmt.Sprintf("%d targets attached", n), func() bool {
		for _, dm := range demos {
			if !d.attached(dm.cmd.Process.Pid) {
				return false
			}
		}
		return true
	})
	for _, dm := range demos {
		dm.release(t)
	}
	return demos
}
