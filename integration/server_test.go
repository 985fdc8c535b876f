package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/daemon"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/procgroup"
	"github.com/specprobe/specprobe/tracer"
)

// A server of several processes: vLLM with TP > 1 runs its model runner in
// one worker process per rank (VLLM::Worker_TP<r>) and its scheduler in
// EngineCore, so the verifies and drafts are in the rank-0 worker and the
// accepted counts in EngineCore. pytargets' run_vllm.py --tp 2 lays its
// processes out so, each logging what ran in it.

// tpServer is a started run_vllm.py --tp N, its processes parked until
// released.
type tpServer struct {
	core    *exec.Cmd
	workers []int // by rank
	log     string
}

func startTPServer(t *testing.T, py string, tp int, extra ...string) *tpServer {
	t.Helper()
	if _, err := os.Stat(py); err != nil {
		t.Skipf("interpreter %s not installed", py)
	}
	_, script := pyTarget(t, "vllm", "run_vllm.py")
	log := filepath.Join(t.TempDir(), "truth.jsonl")
	cmd := exec.Command(py, append([]string{script, "--tp", fmt.Sprint(tp), "--wait-signal", "--log", log}, extra...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &tpServer{core: cmd, log: log, workers: make([]int, tp)}
	t.Cleanup(func() {
		for _, pid := range s.workers {
			if pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	r := bufio.NewReader(stdout)
	for ready := 0; ready < tp+1; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("run_vllm.py --tp %d: %v after %q", tp, err, line)
		}
		var pid int
		if _, err := fmt.Sscanf(line, "ready pid=%d", &pid); err != nil {
			continue
		}
		ready++
		if pid == cmd.Process.Pid {
			if title, _ := procgroup.TitleOf(pid); title.String() != "VLLM::EngineCore" {
				t.Fatalf("EngineCore's title %q", title)
			}
			continue
		}
		title, _ := procgroup.TitleOf(pid)
		rank := title.Rank("TP")
		if title.Name != "Worker" || rank < 0 || rank >= tp {
			t.Fatalf("worker PID %d titled %q", pid, title)
		}
		s.workers[rank] = pid
	}
	go func() { _, _ = r.WriteTo(os.Stdout) }()
	return s
}

func (s *tpServer) release() {
	for _, pid := range append([]int{s.core.Process.Pid}, s.workers...) {
		_ = syscall.Kill(pid, syscall.SIGUSR1)
	}
}

// truth is the server's ground truth: EngineCore's accepts with the rank-0
// worker's verifies and drafts, as the calls of each request.
func (s *tpServer) truth(t *testing.T) map[string][]*engineCall {
	t.Helper()
	both := filepath.Join(t.TempDir(), "server.jsonl")
	var all []byte
	for _, f := range []string{s.log, s.log + ".tp0"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if err := os.WriteFile(both, all, 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string][]*engineCall{}
	for rid, calls := range pyExpected(t, both) {
		for _, c := range calls {
			want[rid] = append(want[rid], &engineCall{stage: c.stage, tid: c.tid, start: c.start, end: c.end, correct: c.correct})
		}
	}
	return want
}

// TestVLLMTensorParallel: attached to EngineCore or to the rank-1 worker,
// specprobe finds the server's other processes by their titles, traces the
// draft and verify in the rank-0 worker and the counts in EngineCore, and
// makes each call's span once (none from rank 1), with its count, one
// trace per request. The spec is detected as attach detects it: the
// speculator's module is imported only in the workers.
func TestVLLMTensorParallel(t *testing.T) {
	needWatchpoints(t)
	catalog, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, py string
		attach   func(s *tpServer) int
		extra    []string
		hog      bool
	}{
		{"EngineCore/3.12", interpreters[2], func(s *tpServer) int { return s.core.Process.Pid }, []string{"--speculator", "mtp"}, false},
		{"rank 1/3.11", interpreters[1], func(s *tpServer) int { return s.workers[1] }, nil, false},
		{"EngineCore/3.13", interpreters[3], func(s *tpServer) int { return s.core.Process.Pid }, []string{"--dummy-every", "3"}, false},
		{"rank 0/debian 3.11", interpreters[4], func(s *tpServer) int { return s.workers[0] }, nil, false},
		{"EngineCore/3.10", interpreters[0], func(s *tpServer) int { return s.core.Process.Pid }, []string{"--dummy-every", "4"}, false},
		// Production batches, short stage calls, every core busy.
		{"large/3.12", interpreters[2], func(s *tpServer) int { return s.core.Process.Pid },
			[]string{"--requests", "150", "--max-batch", "128", "--work-scale", "0.05", "--max-new-tokens", "400", "--noise-calls", "200"}, true},
		{"large/3.11", interpreters[1], func(s *tpServer) int { return s.workers[1] },
			[]string{"--requests", "150", "--max-batch", "128", "--work-scale", "0.05", "--max-new-tokens", "400", "--noise-calls", "200"}, true},
		{"large/3.10", interpreters[0], func(s *tpServer) int { return s.workers[0] },
			[]string{"--requests", "150", "--max-batch", "128", "--work-scale", "0.05", "--max-new-tokens", "400", "--noise-calls", "200"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := c.extra
			if c.hog {
				hogCPUs(t)
			}
			s := startTPServer(t, c.py, 2, extra...)
			pid := c.attach(s)
			spec, _, err := tracer.Detect(catalog, pid, false, 0, func(m string) { t.Log(m) })
			if err != nil {
				t.Fatal(err)
			}
			want := "vllm"
			if len(extra) > 1 && extra[0] == "--speculator" {
				want = "vllm-" + extra[1]
			}
			if spec == nil || spec.Engine != want {
				t.Fatalf("detected %v from PID %d, want %s", spec, pid, want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			res, spans := traceRun(t, ctx, tracer.Config{PID: pid, Spec: spec}, s.release)
			if !res.TargetExited {
				t.Errorf("session ended with %q, want the server's exit", res.Reason)
			}
			compareExact(t, spans, s.truth(t))
			oneTracePerRequest(t, spans)
			for _, sp := range spans {
				if p := resourcePID(sp); p != s.workers[0] {
					t.Fatalf("%s on the resource of PID %d, want the rank-0 worker's %d", sp.Name(), p, s.workers[0])
				}
			}
		})
	}
	assertNoProbesLeft(t)
}

// TestServerDetach: tracing a server stopped while it runs on leaves no
// breakpoint in any thread of any of its processes.
func TestServerDetach(t *testing.T) {
	needWatchpoints(t)
	spec, err := probes.Lookup("vllm")
	if err != nil {
		t.Fatal(err)
	}
	s := startTPServer(t, interpreters[2], 2, "--requests", "100000", "--max-new-tokens", "1000000")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, spans := traceRun(t, ctx, tracer.Config{PID: s.core.Process.Pid, Spec: spec, Duration: 1500 * time.Millisecond}, s.release)
	if res.TargetExited || len(spans) == 0 {
		t.Fatalf("%q with %d spans: want the duration to end a session that traced", res.Reason, len(spans))
	}
	for _, pid := range append([]int{s.core.Process.Pid}, s.workers...) {
		tids, err := procfs.Tasks(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			var fds []int
			for range 4 {
				fd, err := loader.OpenWatchpoint(tid, 0x1000)
				if err != nil {
					t.Errorf("PID %d thread %d: debug register %d: %v (a breakpoint of ours left in it?)", pid, tid, len(fds)+1, err)
					break
				}
				fds = append(fds, fd)
			}
			for _, fd := range fds {
				_ = syscall.Close(fd)
			}
		}
	}
	assertNoProbesLeft(t)
}

// oneTracePerRequest fails when a request's spans are in more than one trace.
func oneTracePerRequest(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	traces := map[string]map[string]bool{}
	for _, s := range spans {
		if !strings.HasPrefix(s.Name(), "spec_") {
			continue
		}
		rid := attrs(s)["rid"].AsString()
		if traces[rid] == nil {
			traces[rid] = map[string]bool{}
		}
		traces[rid][s.SpanContext().TraceID().String()] = true
	}
	for rid, ids := range traces {
		if len(ids) != 1 {
			t.Errorf("request %s in %d traces", rid, len(ids))
		}
	}
}

func resourcePID(s sdktrace.ReadOnlySpan) int {
	for _, kv := range s.Resource().Attributes() {
		if kv.Key == "process.pid" {
			return int(kv.Value.AsInt64())
		}
	}
	return 0
}

// TestDaemonVLLMTensorParallel: the daemon, which sees every process of a
// vLLM server with TP = 2, traces it once: one session, from the rank-0
// worker (the process of the verify), which traces EngineCore's accepts
// too; rank 1 is counted as other_rank and never attached. Every span is
// exported once, equal to the server's log.
func TestDaemonVLLMTensorParallel(t *testing.T) {
	needWatchpoints(t)
	cfg := daemon.Defaults()
	cfg.Listen = "127.0.0.1:0"
	f := startFleet(t, cfg)
	s := startTPServer(t, interpreters[2], 2)
	traced := s.workers[0]
	ours := map[int]bool{s.core.Process.Pid: true}
	for _, pid := range s.workers {
		ours[pid] = true
	}
	next := func(kind string, within time.Duration) daemon.Event {
		return f.nextOf(t, ours, traced, kind, within)
	}
	if e := next("attached", 10*time.Second); e.Engine != "vllm" {
		t.Errorf("the rank-0 worker attached with %s, want vllm", e.Engine)
	}
	s.release()
	if err := s.core.Wait(); err != nil {
		t.Fatalf("run_vllm.py --tp 2: %v", err)
	}
	det := next("detached", 20*time.Second)
	if det.Result == nil || !det.Result.TargetExited {
		t.Fatalf("the session ended for %q, want the server's exit", det.Reason)
	}
	if n := f.d.Totals().Rejected["other_rank"]; n < 1 {
		t.Errorf("other_rank counted %d times, want the rank-1 worker counted", n)
	}
	all := f.mem.GetSpans().Snapshots()
	if mine := f.spansOf(traced); len(all) != len(mine) || len(all) == 0 {
		t.Errorf("%d spans exported, %d of them the rank-0 worker's session's", len(all), len(mine))
	}
	compareExact(t, all, s.truth(t))
	oneTracePerRequest(t, all)
	f.stop()
	assertNoProbesLeft(t)
}
