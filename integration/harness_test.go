// Package integration attaches specprobe to real processes and compares its
// spans with what those processes logged about themselves. The tests need
// root (or CAP_BPF and CAP_PERFMON) and skip with that reason otherwise.
package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/specprobe/specprobe/internal/testreport"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

func repoRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// needWatchpoints: a Python target is traced through hardware watchpoints.
// On a machine that accepts them but never fires them (some hypervisors),
// what the test checks cannot happen there, and it says so in the words
// make test's summary counts (testreport.NoWatchpoints).
func needWatchpoints(t testing.TB) {
	t.Helper()
	privileged(t)
	if err := loader.WatchpointsFire(); err != nil {
		t.Skipf("%s: %v", testreport.NoWatchpoints, err)
	}
}

// needRoot: a test that attaches BPF probes to a native target. Where the
// kernel matrix runs only the Python tests in a guest (SPECPROBE_SUITE=python,
// scripts/vmtest.sh), the host has run it.
func needRoot(t testing.TB) {
	t.Helper()
	privileged(t)
	if os.Getenv("SPECPROBE_SUITE") == "python" {
		t.Skip("traces no Python: run on the host, not in this guest's Python suite (SPECPROBE_SUITE=python)")
	}
}

func privileged(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: attaches BPF probes to a real process")
	}
	if err := loader.CheckPrivileges(); err != nil {
		t.Skipf("needs root or CAP_BPF+CAP_PERFMON to load BPF programs: %v", err)
	}
}

// machineTime is a time bound sized for the host, scaled by
// SPECPROBE_TIME_SCALE where the machine is slower: the kernel matrix's
// guests emulate their CPU (scripts/vmtest.sh sets it). A latency the
// product claims is checked as claimed on the host, and only bounded there.
func machineTime(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("SPECPROBE_TIME_SCALE"), 64); err == nil && f > 1 {
		return time.Duration(float64(d) * f)
	}
	return d
}

// demoBinary builds the demo target through the Makefile if needed.
func demoBinary(t testing.TB, name string) string {
	t.Helper()
	root := repoRoot(t)
	if out, err := exec.Command("make", "-C", root, "--no-print-directory", "demo/"+name).CombinedOutput(); err != nil {
		t.Fatalf("building the demo target: %v\n%s", err, out)
	}
	return filepath.Join(root, "demo", name)
}

// demo is a running demo target, parked until released.
type demo struct {
	cmd   *exec.Cmd
	log   string
	ready chan struct{}
}

func startDemo(t testing.TB, binary string, args ...string) *demo {
	t.Helper()
	d := &demo{log: filepath.Join(t.TempDir(), "truth.jsonl"), ready: make(chan struct{})}
	d.cmd = exec.Command(binary, append([]string{"--wait-signal", "--log", d.log}, args...)...)
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.cmd.Process.Kill(); _ = d.cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("demo target did not get ready: %q %v", line, err)
	}
	return d
}

func (d *demo) release(t testing.TB) {
	if err := d.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatalf("releasing the demo target: %v", err)
	}
}

// traceRun attaches to pid with the given spec, releases the target once the
// probes are armed, and returns what the session saw plus every span.
func traceRun(t testing.TB, ctx context.Context, cfg tracer.Config, release func()) (*tracer.Result, []sdktrace.ReadOnlySpan) {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	cfg.Exporters = append(cfg.Exporters, tracer.Exporter{Name: "memory", SpanExporter: keepSpans{mem}})
	attached := make(chan struct{})
	cfg.Attached = attached
	if cfg.Log == nil {
		cfg.Log = testLog{t}
	}
	go func() {
		select {
		case <-attached:
			release()
		case <-ctx.Done():
		}
	}()
	res, err := tracer.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("tracer.Run: %v", err)
	}
	return res, mem.GetSpans().Snapshots()
}

// runParked starts argv, waits for its "ready" line and traces it with
// spec until it exits; SIGUSR1 sets it going once the probes are armed.
func runParked(t *testing.T, spec *probes.Spec, env []string, argv ...string) (*tracer.Result, []sdktrace.ReadOnlySpan, string) {
	t.Helper()
	return runParkedWith(t, tracer.Config{Spec: spec}, env, argv...)
}

// runParkedWith is runParked with cfg (its PID and Log set here).
func runParkedWith(t *testing.T, cfg tracer.Config, env []string, argv ...string) (*tracer.Result, []sdktrace.ReadOnlySpan, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); !strings.HasPrefix(line, "ready") {
		t.Fatalf("target not ready: %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var log strings.Builder
	cfg.PID, cfg.Log = cmd.Process.Pid, &log
	res, spans := traceRun(t, ctx, cfg, func() { _ = cmd.Process.Signal(syscall.SIGUSR1) })
	t.Log(log.String())
	return res, spans, log.String()
}

// keepSpans stops the in-memory exporter from being reset at shutdown.
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func demoSpec(t testing.TB) *probes.Spec {
	s, err := probes.Lookup("demo")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// truthCall is one line of the demo target's ground-truth log.
type truthCall struct {
	Stage     string   `json:"stage"`
	TID       uint32   `json:"tid"`
	StartNs   int64    `json:"start_ns"`
	EndNs     int64    `json:"end_ns"`
	RIDs      []string `json:"rids"`
	NumDrafts *int64   `json:"num_drafts"`
	Correct   *int64   `json:"num_correct_drafts"`
}

func readTruth(t testing.TB, path string) []truthCall {
	t.Helper()
	return readJSONL[truthCall](t, path)
}

// readJSONL reads a target's log of one JSON object a line.
func readJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, v)
	}
	return out
}

func waitExit(t testing.TB, d *demo, want int) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("demo target: %v", err)
		}
		if code != want {
			t.Fatalf("demo target exited with %d, want %d", code, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo target did not exit within 30s")
	}
}

func fmtNs(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000000") }

var _ = fmt.Sprintf

// memCgroup is a memory cgroup the test made, with a limit, for a process
// that must live within what its DaemonSet would give it.
type memCgroup struct {
	dir string
	v2  bool
}

// newMemCgroup makes a memory cgroup below the test's own, limited to
// limit bytes; it skips the test where there is none to make.
func newMemCgroup(t *testing.T, limit int64) *memCgroup {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	var cg *memCgroup
	for _, line := range strings.Split(string(self), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) == 3 && f[1] == "memory":
			cg = &memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", f[2])}
		case len(f) == 3 && f[0] == "0" && cg == nil:
			if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(b), "memory") {
				cg = &memCgroup{dir: filepath.Join("/sys/fs/cgroup", f[2]), v2: true}
			}
		}
	}
	if cg == nil {
		t.Skip("no memory cgroup controller to cap the daemon's memory with")
	}
	cg.dir = filepath.Join(cg.dir, fmt.Sprintf("specprobe-test-%d", os.Getpid()))
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(cg.dir) }) // after the processes in it are gone
	limitFile := "memory.limit_in_bytes"
	if cg.v2 {
		limitFile = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("setting the memory limit: %v", err)
	}
	return cg
}

// wrapper runs a command inside the cgroup from its first instruction.
func (c *memCgroup) wrapper() []string {
	return []string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.dir}
}

// peak is the most memory the cgroup's processes have used.
func (c *memCgroup) peak() int64 {
	name := "memory.max_usage_in_bytes"
	if c.v2 {
		name = "memory.peak"
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, name))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// oomKills counts the processes the kernel killed for the limit.
func (c *memCgroup) oomKills() int {
	name := "memory.oom_control"
	if c.v2 {
		name = "memory.events"
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, name))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// asUser runs argv as an unprivileged user (uid and gid 1000, no groups):
// an attacker on the node.
func asUser(argv ...string) []string {
	return append([]string{"setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--"}, argv...)
}
