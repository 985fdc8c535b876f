package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/features"

	"github.com/specprobe/specprobe/export/otlptest"
	"github.com/specprobe/specprobe/internal/testinterp"
)

// daemonCLI is `specprobe daemon` running as its own process.
type daemonCLI struct {
	*proc
	base string // http://127.0.0.1:PORT
}

func startDaemonCLI(t *testing.T, env []string, args ...string) *daemonCLI {
	t.Helper()
	return startDaemonAs(t, nil, env, args...)
}

// startDaemonAs runs the daemon behind wrapper (e.g. setpriv and its flags).
func startDaemonAs(t *testing.T, wrapper []string, env []string, args ...string) *daemonCLI {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	argv := append(append(append([]string{}, wrapper...), specprobeBinary(t), "daemon", "--listen", addr), args...)
	d := &daemonCLI{proc: startProc(t, env, argv...), base: "http://" + addr}
	d.waitFor(t, "/readyz to succeed", func() bool { code, _ := d.get("/readyz"); return code == 200 })
	return d
}

func (d *daemonCLI) get(path string) (int, string) {
	r, err := http.Get(d.base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// waitFor polls what the daemon shows from outside (its HTTP endpoints).
func (d *daemonCLI) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait := machineTime(20 * time.Second)
	for deadline := time.Now().Add(wait); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) || d.exited() {
			t.Fatalf("daemon: waited %s for %s:\n%s", wait, what, d.out.String())
		}
	}
}

func (d *daemonCLI) attached(pid int) bool {
	_, body := d.get("/targets")
	var ts []struct {
		PID      int  `json:"pid"`
		Attached bool `json:"attached"`
	}
	_ = json.Unmarshal([]byte(body), &ts)
	for _, x := range ts {
		if x.PID == pid && x.Attached {
			return true
		}
	}
	return false
}

func (d *daemonCLI) metric(name string) float64 {
	_, body := d.get("/metrics")
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// stop sends SIGTERM and wants exit 0 and nothing of ours left in the kernel.
func (d *daemonCLI) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if code := d.wait(t, machineTime(30*time.Second)); code != 0 {
		t.Fatalf("daemon after SIGTERM: exit %d, want 0:\n%s", code, d.out.String())
	}
	assertNoProbesLeft(t)
}

// TestDaemonCLI runs the daemon binary against a real OTLP receiver: a target
// started after it is traced to the collector with the process and node on
// the resource, the metrics count it, SIGTERM detaches everything.
func TestDaemonCLI(t *testing.T) {
	needRoot(t)
	rcv := &otlptest.Receiver{Protocol: "grpc"}
	rcv.Start(t)
	d := startDaemonCLI(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint(), "OTEL_EXPORTER_OTLP_INSECURE=true", "NODE_NAME=node-a"},
		"--exporter", "otlp", "--engine", "demo", "--metrics-exporter", "none")
	target := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "8")
	pid := target.cmd.Process.Pid
	d.waitFor(t, fmt.Sprintf("PID %d attached", pid), func() bool { return d.attached(pid) })
	target.release(t)
	waitExit(t, target, 0)
	want := 0
	for _, c := range readTruth(t, target.log) {
		if c.Stage != "accept" {
			want += len(c.RIDs)
		}
	}
	d.waitFor(t, "the detach", func() bool { return d.metric("specprobe_daemon_detaches_total") == 1 })
	got := 0
	for _, s := range rcv.Spans() {
		if strings.HasPrefix(s.GetName(), "spec_") {
			got++
		}
		if s.ResourceAttr("process.pid") != int64(pid) || s.ResourceAttr("k8s.node.name") != "node-a" || s.ResourceAttr("service.name") != "demo" {
			t.Fatalf("resource of %s: %v", s.GetName(), s.Resource.GetAttributes())
		}
	}
	if got != want {
		t.Errorf("receiver got %d stage spans, the target made %d stage calls (per request)", got, want)
	}
	if a, e := d.metric("specprobe_daemon_attaches_total"), d.metric("specprobe_events_total"); a != 1 || e != float64(2*len(readTruth(t, target.log))) {
		t.Errorf("metrics: %v attaches, %v events; want 1 and 2 per stage call", a, e)
	}
	d.stop(t)
}

// TestDaemonCollectorDown: spans that cannot be delivered are counted on
// /metrics; the daemon stays healthy and the target is unharmed.
func TestDaemonCollectorDown(t *testing.T) {
	needRoot(t)
	d := startDaemonCLI(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_EXPORTER_OTLP_TIMEOUT=500"},
		"--exporter", "otlp-grpc", "--engine", "demo", "--metrics-exporter", "none")
	target := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "6")
	pid := target.cmd.Process.Pid
	d.waitFor(t, fmt.Sprintf("PID %d attached", pid), func() bool { return d.attached(pid) })
	target.release(t)
	waitExit(t, target, 0)
	d.waitFor(t, "failed spans counted", func() bool { return d.metric("specprobe_spans_failed_total") > 0 })
	if code, body := d.get("/healthz"); code != 200 {
		t.Errorf("/healthz with the collector down: %d %s", code, body)
	}
	d.stop(t)
}

// TestDaemonLeastCapabilities runs the daemon with only the capabilities the
// DaemonSet grants (deploy/kubernetes/specprobe.yaml) and checks it still
// traces a native and a Python target: the manifest's list is enough.
func TestDaemonLeastCapabilities(t *testing.T) {
	needWatchpoints(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed: cannot drop capabilities")
	}
	caps := "-all,+bpf,+perfmon,+sys_ptrace,+dac_read_search"
	dropped := []string{setpriv, "--bounding-set=" + caps, "--inh-caps=" + caps, "--"}
	allowPerfEvents(t, dropped)
	d := startDaemonAs(t, dropped, nil,
		"--exporter", "otlp-file=/dev/null", "--engine", "demo", "--engine", "sglang", "--metrics-exporter", "none")
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	// CAP_BPF 39, CAP_PERFMON 38, CAP_SYS_PTRACE 19, CAP_DAC_READ_SEARCH 2.
	if eff := regexp.MustCompile(`CapEff:\s+(\S+)`).FindStringSubmatch(string(status)); eff == nil || eff[1] != "000000c000080004" {
		t.Fatalf("daemon's effective capabilities %v, want exactly the four (000000c000080004)", eff)
	}
	target := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "4")
	pid := target.cmd.Process.Pid
	// Without uprobe_multi links (before 6.6) each uprobe is a perf event,
	// which needs CAP_SYS_ADMIN: the daemon must say so, not fail mutely.
	multi := features.HaveBPFLinkUprobeMulti() == nil
	if multi {
		d.waitFor(t, fmt.Sprintf("native PID %d attached", pid), func() bool { return d.attached(pid) })
	} else {
		d.waitFor(t, fmt.Sprintf("native PID %d refused, naming CAP_SYS_ADMIN", pid), func() bool {
			return strings.Contains(d.out.String(), "which Linux allows only with CAP_SYS_ADMIN")
		})
	}
	target.release(t)
	waitExit(t, target, 0)
	py := testinterp.Py312
	if _, err := os.Stat(py); err == nil {
		cmd, _ := launch(t, py, filepath.Join(repoRoot(t), "pytargets", "run_sglang.py"), "--requests", "4", "--wait-signal")
		d.waitFor(t, "the Python target attached", func() bool { return d.attached(cmd.Process.Pid) })
		_ = cmd.Process.Signal(syscall.SIGUSR1)
		if code := exitCode(t, cmd); code != 0 {
			t.Fatalf("Python target exited with %d", code)
		}
	}
	d.waitFor(t, "the detaches", func() bool { return d.metric("specprobe_daemon_processes") == 0 })
	if f := d.metric("specprobe_daemon_attach_failures_total"); multi && f != 0 {
		t.Errorf("%v attach failures with the DaemonSet's capabilities:\n%s", f, d.out.String())
	} else if !multi && f == 0 {
		t.Errorf("the native target's refused attach was not counted:\n%s", d.out.String())
	}
	if _, err := os.Stat(py); err == nil && !regexp.MustCompile(`python: requests read for [1-9]`).MatchString(d.out.String()) {
		t.Errorf("no Python request read with these capabilities:\n%s", d.out.String())
	}
	d.stop(t)
}

// allowPerfEvents: where this kernel refuses perf events to the capabilities
// dropped gives (Debian's kernels at kernel.perf_event_paranoid 3), specprobe
// says so and names the fix, which the test then applies for its duration,
// as the DaemonSet's docs ask of such a node.
func allowPerfEvents(t *testing.T, dropped []string) {
	t.Helper()
	const sysctl = "/proc/sys/kernel/perf_event_paranoid"
	was, err := os.ReadFile(sysctl)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dropped[0], append(dropped[1:], specprobeBinary(t), "doctor")...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FAIL privileges") {
		return // the capabilities are enough here
	}
	if !strings.Contains(string(out), "set sysctl kernel.perf_event_paranoid=2") {
		t.Fatalf("doctor with the DaemonSet's capabilities fails without naming the fix:\n%s", out)
	}
	t.Logf("kernel.perf_event_paranoid %s refuses CAP_PERFMON here: set to 2 for the test", strings.TrimSpace(string(was)))
	if err := os.WriteFile(sysctl, []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(sysctl, was, 0) })
}

// TestDaemonBadInput: each mistake is named, with a non-zero exit.
func TestDaemonBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/bad.yaml"
	if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:0\nmax_procs: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"daemon", "--config", bad}, "bad.yaml: line 2: field max_procs not found (not a config key)"},
		{[]string{"daemon", "--config", dir + "/none.yaml"}, "reading the config"},
		{[]string{"daemon", "--listen", "9464"}, `listen "9464": want HOST:PORT`},
		{[]string{"daemon", "--max-processes", "0"}, "max_processes 0: want at least 1"},
		{[]string{"daemon", "--flush-timeout", "-1s"}, "flush_timeout -1s: want a positive duration"},
		{[]string{"daemon", "--metrics-interval", "-1s"}, "metrics_interval -1s: want at least 1s"},
		{[]string{"daemon", "--memory-limit", "lots"}, `"lots" is not a size`},
		{[]string{"daemon", "--engine", "nope"}, `no engine "nope" in the catalog`},
		{[]string{"daemon", "--exporter", "carrier-pigeon"}, `unknown exporter "carrier-pigeon"`},
	} {
		code, out := cli(t, nil, c.args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("specprobe %v: exit %d, output %q; want non-zero and %q", c.args, code, out, c.want)
		}
	}
}
