package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

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
	bin := demoBinary(t, "specdemo-cet")
	var demos []*demo
	for range targets {
		demos = append(demos, startDemo(t, bin, "--threads", "2", "--batch", "4", "--requests", "400"))
	}
	d.waitFor(t, fmt.Sprintf("%d targets attached", targets), func() bool {
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
		m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(status)
		if m == nil {
			t.Fatalf("no %s in /proc/PID/status", field)
		}
		v, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return v << 10
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
