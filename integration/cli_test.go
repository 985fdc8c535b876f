package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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

// specprobeBinary builds the CLI once per test run.
func specprobeBinary(t testing.TB) string {
	t.Helper()
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

// cli runs specprobe with a timeout and returns its exit code and output.
func cli(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(specprobeBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, out.String()
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("specprobe %v did not finish in 60s:\n%s", args, out.String())
	}
	return 0, ""
}

// attachCLI starts `specprobe attach` on a parked demo, releases the demo
// once the probes are armed and waits for specprobe to finish.
func attachCLI(t *testing.T, d *demo, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(specprobeBinary(t), append([]string{"attach", "--pid", itoa(d.cmd.Process.Pid)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "attached to PID") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("specprobe did not attach:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the output, not standing in for a sync
	}
	d.release(t)
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, out.String()
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

// TestSignalsDetach: SIGINT and SIGTERM end the session with exit 0 and no probe left.
func TestSignalsDetach(t *testing.T) {
	needRoot(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			d := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "1000000")
			d.release(t)
			cmd := exec.Command(specprobeBinary(t), "attach", "--pid", itoa(d.cmd.Process.Pid))
			out := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for !strings.Contains(out.String(), "attached to PID") {
				if cmd.ProcessState != nil {
					t.Fatalf("specprobe ended early:\n%s", out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			_ = cmd.Process.Signal(sig)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("specprobe after %s: %v\n%s", sig, err, out.String())
			}
			if !strings.Contains(out.String(), "detached (interrupted)") {
				t.Errorf("no detach message:\n%s", out.String())
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

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no such pid", []string{"attach", "--pid", "999999999"}, []string{"no process with PID 999999999"}},
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
