package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/specprobe/specprobe/export/otlptest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// specprobeBinary builds the CLI once per test run, unless SPECPROBE_BIN
// names one built already (scripts/vmtest.sh: linking in a guest is slow).
func specprobeBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("SPECPROBE_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "specprobe-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "specprobe")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/specprobe")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// cli runs specprobe to its end and returns its exit code and output.
func cli(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	p := startProc(t, env, append([]string{specprobeBinary(t)}, args...)...)
	code := p.wait(t, machineTime(60*time.Second))
	return code, p.out.String()
}

// attachCLI starts `specprobe attach` on a parked demo, releases the demo
// once the probes are armed and waits for specprobe to finish.
func attachCLI(t *testing.T, d *demo, env []string, args ...string) (int, string) {
	t.Helper()
	return attachCLIAs(t, d, nil, env, args...)
}

// attachCLIAs is attachCLI with specprobe run behind wrapper (e.g. prlimit
// and its flags).
func attachCLIAs(t *testing.T, d *demo, wrapper, env []string, args ...string) (int, string) {
	t.Helper()
	argv := append(append(slices.Clone(wrapper), specprobeBinary(t), "attach", "--pid", itoa(d.cmd.Process.Pid)), args...)
	p := startProc(t, env, argv...)
	p.waitOutput(t, "attached to PID", machineTime(30*time.Second))
	d.release(t)
	code := p.wait(t, machineTime(60*time.Second))
	return code, p.out.String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestOTLPEndToEnd exports over real OTLP/gRPC to a receiver the test runs and
// checks that every stage call the target made arrived as a span.
func TestOTLPEndToEnd(t *testing.T) {
	needRoot(t)
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			rcv := &otlptest.Receiver{Protocol: proto}
			rcv.Start(t)
			env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint(), "OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_EXPORTER_OTLP_PROTOCOL=" + proto}
			d := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "12")
			code, out := attachCLI(t, d, env, "--exporter", "otlp")
			if code != 0 {
				t.Fatalf("specprobe exited %d:\n%s", code, out)
			}
			waitExit(t, d, 0)
			truth := readTruth(t, d.log)
			want := 0
			for _, c := range truth {
				if c.Stage != "accept" {
					want += len(c.RIDs)
				}
			}
			got := 0
			for _, s := range rcv.Spans() {
				if strings.HasPrefix(s.GetName(), "spec_") {
					got++
				}
				if s.ResourceAttr("service.name") != "demo" || s.ResourceAttr("process.pid") != int64(d.cmd.Process.Pid) ||
					s.ResourceAttr("process.executable.name") != "specdemo-cet" || s.ResourceAttr("host.name") == nil {
					t.Fatalf("resource of %s: %v", s.GetName(), s.Resource.GetAttributes())
				}
			}
			if got != want {
				t.Errorf("receiver got %d stage spans, the target made %d stage calls (per request)", got, want)
			}
		})
	}
}

// TestCollectorDown: an unreachable collector costs spans, counted, not the run.
func TestCollectorDown(t *testing.T) {
	needRoot(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_EXPORTER_OTLP_TIMEOUT=500"}
	d := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "6")
	code, out := attachCLI(t, d, env, "--exporter", "otlp-grpc")
	waitExit(t, d, 0)
	if code != 0 || !strings.Contains(out, "failed") {
		t.Fatalf("exit %d, want 0 with failed spans counted:\n%s", code, out)
	}
	if strings.Contains(out, " 0 failed") {
		t.Errorf("no export failure counted with the collector down:\n%s", out)
	}
}

// zombie starts a process whose child has exited unreaped, and returns the
// child's PID.
func zombie(t *testing.T) string {
	t.Helper()
	// sh forks true, then becomes sleep, which never waits for it.
	cmd := exec.Command("/bin/sh", "-c", "true & exec sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		for _, k := range strings.Fields(string(kids)) {
			if stat, _ := os.ReadFile("/proc/" + k + "/stat"); strings.Contains(string(stat), ") Z ") {
				return k
			}
		}
	}
	t.Fatal("no zombie child appeared")
	return ""
}

type nonELFTarget struct{ pid, file, spec string }

// mapsNonELF starts a process that maps a text file executable, and writes
// a spec whose binary is that file.
func mapsNonELF(t *testing.T, spec []byte) nonELFTarget {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "libfake.so")
	if err := os.WriteFile(file, bytes.Repeat([]byte("not an ELF file\n"), 512), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `import mmap, os, sys, time
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
print("ready", flush=True)
time.sleep(60)
`
	cmd := exec.Command("python3", "-c", script, file)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Skipf("python3 not available to map a file: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("mapping process: %q %v", line, err)
	}
	path := filepath.Join(dir, "fake.yaml")
	_ = os.WriteFile(path, bytes.ReplaceAll(spec, []byte("binary: [specdemo, specdemo-cet]"), []byte("binary: libfake.so")), 0o644)
	return nonELFTarget{itoa(cmd.Process.Pid), file, path}
}

// TestInterruptCollectorDown: SIGINT while the collector is unreachable
// (OTLP's own timeout left at its 10s default) ends with exit 0 within the
// flush timeout, the spans not delivered counted.
func TestInterruptCollectorDown(t *testing.T) {
	needRoot(t)
	d := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "1000000")
	d.release(t)
	p := startProc(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_INSECURE=true"},
		specprobeBinary(t), "attach", "--pid", itoa(d.cmd.Process.Pid), "--exporter", "otlp-grpc", "--flush-timeout", "2s")
	p.waitOutput(t, "attached to PID", machineTime(30*time.Second))
	time.Sleep(500 * time.Millisecond) // let spans pile up for the dead collector: this is the workload, not a sync
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	code := p.wait(t, machineTime(30*time.Second))
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("exit %d after SIGINT with the collector down, want 0:\n%s", code, p.out.String())
	}
	if took > 2*time.Second+1500*time.Millisecond {
		t.Errorf("took %s to exit, want the 2s flush timeout and little more", took)
	}
	if !strings.Contains(p.out.String(), "flush timeout counts as dropped") || strings.Contains(p.out.String(), " 0 dropped (queue full or flush timeout), 0 failed") {
		t.Errorf("undelivered spans not counted:\n%s", p.out.String())
	}
	t.Logf("exit 0 %s after SIGINT", took.Round(time.Millisecond))
	assertNoProbesLeft(t)
}

// TestSignalsDetach: SIGINT and SIGTERM end the session with exit 0 and no probe left.
func TestSignalsDetach(t *testing.T) {
	needRoot(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			d := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "1000000")
			d.release(t)
			p := startProc(t, nil, specprobeBinary(t), "attach", "--pid", itoa(d.cmd.Process.Pid))
			p.waitOutput(t, "attached to PID", machineTime(30*time.Second))
			_ = p.cmd.Process.Signal(sig)
			if code := p.wait(t, machineTime(30*time.Second)); code != 0 {
				t.Fatalf("specprobe after %s: exit %d, want 0:\n%s", sig, code, p.out.String())
			}
			if !strings.Contains(p.out.String(), "detached (interrupted)") {
				t.Errorf("no detach message:\n%s", p.out.String())
			}
			assertNoProbesLeft(t)
			if err := syscall.Kill(d.cmd.Process.Pid, 0); err != nil {
				t.Errorf("target gone after specprobe's detach: %v", err)
			}
		})
	}
}

// TestBadInput: each mistake gives a non-zero exit and a message that says what to do.
func TestBadInput(t *testing.T) {
	needRoot(t)
	d := startDemo(t, demoBinary(t, "specdemo-cet"))
	pid := itoa(d.cmd.Process.Pid)
	dir := t.TempDir()
	spec, _ := os.ReadFile(filepath.Join(repoRoot(t), "probes", "catalog", "demo.yaml"))
	missing := filepath.Join(dir, "missing.yaml")
	_ = os.WriteFile(missing, bytes.Replace(spec, []byte("symbol: demo_verify"), []byte("symbol: demo_verfy"), 1), 0o644)
	broken := filepath.Join(dir, "broken.yaml")
	_ = os.WriteFile(broken, bytes.Replace(spec, []byte("scope: batch"), []byte("scope: batchh"), 1), 0o644)
	otherBinary := filepath.Join(dir, "other.yaml")
	_ = os.WriteFile(otherBinary, bytes.ReplaceAll(spec, []byte("binary: [specdemo, specdemo-cet]"), []byte("binary: libnothere.so")), 0o644)
	nonELF := mapsNonELF(t, spec)

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no such pid", []string{"attach", "--pid", "4194303"}, []string{"no process with PID 4194303"}},
		// 2^32+1 would be PID 1 once truncated to the kernel's 32 bits.
		{"pid past the limit", []string{"attach", "--pid", "4294967297"}, []string{"invalid PID 4294967297", "1 to 4194304"}},
		{"kernel thread", []string{"attach", "--pid", "2"}, []string{"PID 2 (kthreadd) is a kernel thread"}},
		{"zombie", []string{"attach", "--pid", zombie(t)}, []string{"has exited", "zombie", "not reaped"}},
		{"non-ELF mapped file", []string{"attach", "--pid", nonELF.pid, "--probes", nonELF.spec}, []string{nonELF.file, "not an ELF file"}},
		{"negative duration", []string{"attach", "--pid", pid, "--duration", "-5s"}, []string{"--duration -5s: want a positive duration"}},
		{"negative request idle", []string{"attach", "--pid", pid, "--request-idle", "-1s"}, []string{"--request-idle -1s: want a positive duration"}},
		{"negative import wait", []string{"attach", "--pid", pid, "--import-wait", "-1s"}, []string{"--import-wait -1s: want a positive duration"}},
		{"symbol missing", []string{"attach", "--pid", pid, "--probes", missing}, []string{"stage verify", `symbol "demo_verfy" not found`, "specdemo-cet", "close names: demo_verify"}},
		{"malformed spec", []string{"attach", "--pid", pid, "--probes", broken}, []string{broken + ":", "expected request or batch"}},
		{"binary not mapped", []string{"attach", "--pid", pid, "--probes", otherBinary}, []string{"maps none of libnothere.so", "specdemo-cet"}},
		{"unknown engine", []string{"attach", "--pid", pid, "--engine", "nope"}, []string{`no engine "nope"`, "demo"}},
		{"unknown exporter", []string{"attach", "--pid", pid, "--exporter", "kafka"}, []string{`unknown exporter "kafka"`}},
		{"file exporter without file", []string{"attach", "--pid", pid, "--exporter", "perfetto"}, []string{"needs a file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := cli(t, nil, c.args...)
			if code == 0 {
				t.Fatalf("exit 0, want an error:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}

	t.Run("no privileges", func(t *testing.T) {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("setpriv (util-linux) not installed: cannot drop capabilities to test the message")
		}
		cmd := exec.Command(setpriv, "--inh-caps=-all", "--bounding-set=-all", "--", specprobeBinary(t), "attach", "--pid", pid)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("attach without capabilities succeeded:\n%s", out)
		}
		for _, w := range []string{"CAP_BPF", "CAP_PERFMON"} {
			if !strings.Contains(string(out), w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	})
}
