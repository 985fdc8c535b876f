package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/specprobe/specprobe/internal/testinterp"
)

// TestProbesCheckLive: `probes check --pid` against today's SGLang-shaped
// target with a verify call in progress (parked inside it): the catalog
// spec resolves, each stage with its file and line, the draft's argument
// list resolved to batch, and the running verify's requests read once —
// the requests the target's own log gives that call. The autumn-2026 spec
// is refused naming the draft's real arguments. Nothing is armed, and the
// target runs to its end unharmed.
func TestProbesCheckLive(t *testing.T) {
	needRoot(t)
	py := testinterp.Py312
	if !fileExists(py) {
		t.Skipf("interpreter %s not installed", py)
	}
	log := filepath.Join(t.TempDir(), "truth.jsonl")
	cmd := exec.Command(py, filepath.Join(repoRoot(t), "pytargets", "run_sglang.py"),
		"--wait-signal", "--park-in-verify", "2", "--requests", "6", "--log", log)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	lines := bufio.NewScanner(stdout)
	waitLine := func(prefix string) {
		t.Helper()
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), prefix) {
				return
			}
		}
		t.Fatalf("target ended before printing %q", prefix)
	}
	waitLine("ready")
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitLine("parked")

	code, out := cli(t, nil, "probes", "check", "--pid", itoa(pid))
	t.Logf("probes check --pid %d --engine sglang (exit %d):\n%s", pid, code, out)
	if code != 0 {
		t.Fatalf("exit %d for the catalog spec", code)
	}
	for _, want := range []string{
		"spec sglang (EAGLEWorkerV2)",
		"ok    draft        sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker.draft at " + filepath.Join(repoRoot(t), "pytargets/sglang/srt/speculative/eagle_worker_v2.py") + ":",
		"requests: arg [batch, model_worker_batch] is batch here",
		"ok    verify       sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.verify at ",
		"reads batch.reqs[*].rid at each return, in the watchpoint program",
		fmt.Sprintf("thread %d is in EAGLEWorkerV2.verify now", pid),
		"no thread is in EagleDraftWorker.draft now",
		"nothing was attached",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	live := ""
	for _, l := range strings.Split(out, "\n") {
		if _, v, ok := strings.Cut(l, "requests batch.reqs[*].rid = "); ok {
			live = v
		}
	}
	assertNoProbesLeft(t)

	code, out = cli(t, nil, "probes", "check", "--pid", itoa(pid), "--probes", filepath.Join(repoRoot(t), "integration", "testdata", "autumn2026", "sglang.yaml"))
	want := "stage draft: EagleDraftWorker.draft has no argument model_worker_batch (its arguments: self, batch"
	if code != 1 || !strings.Contains(out, "FAIL  ") || !strings.Contains(out, want) || !strings.Contains(out, "1 problem(s)") {
		t.Errorf("the autumn-2026 spec: exit %d, want 1 and %q:\n%s", code, want, out)
	}
	assertNoProbesLeft(t)

	if err := cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("target exited with %d", code)
	}
	// The running call's requests, as the target logged its second verify.
	verifies := 0
	var rids []string
	for _, l := range readLines(t, log) {
		var c pyTruth
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		if c.Stage == "verify" {
			if verifies++; verifies == 2 {
				rids = c.RIDs
			}
		}
	}
	var quoted []string
	for _, r := range rids {
		quoted = append(quoted, fmt.Sprintf("%q", r))
	}
	if got := "[" + strings.Join(quoted, ", ") + "]"; live != got {
		t.Errorf("live requests %s, the target's second verify served %s", live, got)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestProbesCheckNative: `probes check --pid` of the demo target resolves
// each native stage (file, offset, first instruction) and, for a spec
// whose symbol the binary lacks, fails naming the files searched and the
// closest names, each stage on its own.
func TestProbesCheckNative(t *testing.T) {
	needRoot(t)
	d := startDemo(t, demoBinary(t, "specdemo"))
	code, out := cli(t, nil, "probes", "check", "--pid", itoa(d.cmd.Process.Pid), "--engine", "demo")
	if code != 0 || !strings.Contains(out, "ok    verify       demo_verify in "+demoBinary(t, "specdemo")+" at +0x") {
		t.Errorf("demo: exit %d:\n%s", code, out)
	}
	spec := filepath.Join(t.TempDir(), "drift.yaml")
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "probes", "catalog", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, []byte(strings.Replace(string(src), "symbol: demo_draft\n", "symbol: demo_draft_v2\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = cli(t, nil, "probes", "check", "--pid", itoa(d.cmd.Process.Pid), "--probes", spec)
	for _, want := range []string{`stage draft: symbol "demo_draft_v2" not found`, "close names: demo_draft", "ok    verify", "1 problem(s)"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("drifted symbol: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	assertNoProbesLeft(t)
}

// TestProbesCheckServer: `probes check --pid` of EngineCore or of the
// rank-1 worker of a vLLM server with TP = 2 checks each stage where it
// runs: draft and verify in the rank-0 worker, accept in EngineCore.
func TestProbesCheckServer(t *testing.T) {
	needRoot(t)
	s := startTPServer(t, interpreters[2], 2)
	for _, pid := range []int{s.core.Process.Pid, s.workers[1]} {
		code, out := cli(t, nil, "probes", "check", "--pid", itoa(pid))
		t.Logf("probes check --pid %d (exit %d):\n%s", pid, code, out)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		for _, want := range []string{
			fmt.Sprintf("PID %d (VLLM::Worker_TP0) runs draft, verify", s.workers[0]),
			fmt.Sprintf("PID %d (VLLM::EngineCore) runs accept", s.core.Process.Pid),
			"ok    verify       vllm.v1.worker.gpu.model_runner.GPUModelRunner.execute_model",
			"ok    accept       vllm.v1.core.sched.scheduler.Scheduler.update_from_output",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("probes check --pid %d says nothing of %q", pid, want)
			}
		}
	}
}
