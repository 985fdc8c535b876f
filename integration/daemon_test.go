package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/specprobe/specprobe/daemon"
	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

// fleet is a daemon running in the test process, with every span kept and
// every attach and detach reported on a channel.
type fleet struct {
	d      *daemon.Daemon
	mem    *tracetest.InMemoryExporter
	events chan daemon.Event
	stop   func()
}

func startFleet(t *testing.T, cfg daemon.Config) *fleet {
	t.Helper()
	specs, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	return startFleetWith(t, cfg, specs)
}

// startFleetWith is startFleet with the given specs instead of the catalog;
// each option edits the daemon's options before it starts.
func startFleetWith(t *testing.T, cfg daemon.Config, specs []*probes.Spec, options ...func(*daemon.Options)) *fleet {
	t.Helper()
	var err error
	f := &fleet{mem: tracetest.NewInMemoryExporter(), events: make(chan daemon.Event, 256)}
	listening := make(chan string, 1)
	opts := daemon.Options{Config: cfg, Specs: specs, Log: testLog{t},
		Exporters: []tracer.Exporter{{Name: "memory", SpanExporter: keepSpans{f.mem}}},
		Listening: func(a string) { listening <- a },
		Notify:    func(e daemon.Event) { f.events <- e }}
	for _, o := range options {
		o(&opts)
	}
	f.d, err = daemon.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx) }()
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	}
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		})
	}
	t.Cleanup(f.stop)
	return f
}

// next waits for the daemon's next event about pid (others are ignored).
func (f *fleet) next(t *testing.T, pid int, kind string, within time.Duration) daemon.Event {
	t.Helper()
	within = machineTime(within)
	deadline := time.After(within)
	for {
		select {
		case e := <-f.events:
			if e.PID != pid {
				continue
			}
			if e.Kind != kind {
				t.Fatalf("PID %d: daemon reported %s (%s), want %s", pid, e.Kind, e.Reason, kind)
			}
			return e
		case <-deadline:
			t.Fatalf("PID %d: no %s event within %s", pid, kind, within)
		}
	}
}

// release lets a parked target run to its end and waits for the daemon to
// detach because it exited.
func (f *fleet) release(t *testing.T, cmd *exec.Cmd) daemon.Event {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("target exited with %d", code)
	}
	det := f.next(t, cmd.Process.Pid, "detached", 20*time.Second)
	if det.Result == nil || !det.Result.TargetExited {
		t.Fatalf("detached for %q, want the target's exit", det.Reason)
	}
	return det
}

// spansOf are the spans of one process (the resource's process.pid).
func (f *fleet) spansOf(pid int) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range f.mem.GetSpans().Snapshots() {
		for _, kv := range s.Resource().Attributes() {
			if kv.Key == "process.pid" && kv.Value.AsInt64() == int64(pid) {
				out = append(out, s)
			}
		}
	}
	return out
}

// nextOf waits for the daemon's next event of kind about one of the
// processes ours: each event about them must be of kind and about traced.
func (f *fleet) nextOf(t *testing.T, ours map[int]bool, traced int, kind string, within time.Duration) daemon.Event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e := <-f.events:
			if !ours[e.PID] {
				continue
			}
			if e.PID != traced || e.Kind != kind {
				t.Fatalf("daemon %s PID %d (%s, %s), want %s of PID %d only", e.Kind, e.PID, e.Engine, e.Reason, kind, traced)
			}
			return e
		case <-deadline:
			t.Fatalf("no %s event for PID %d within %s", kind, traced, within)
		}
	}
}

// launch starts a target that parks until SIGUSR1, through `sh -c exec` as a
// launcher script would (the daemon sees the exec of a process that was a shell).
func launch(t *testing.T, argv ...string) (*exec.Cmd, time.Time) {
	t.Helper()
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + a + "'"
	}
	cmd := exec.Command("/bin/sh", "-c", "exec "+strings.Join(quoted, " "))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("target %s did not get ready: %q %v", argv[0], line, err)
	}
	return cmd, started
}

// containerScript runs its arguments as PID 1 of a new PID namespace, from a
// private tmpfs the host cannot see (as a container's image is), when the
// first argument is a file to copy there; else from where it is.
const containerScript = `mount -t tmpfs none /mnt && b="$0" && if [ "$COPY" = 1 ]; then cp "$0" /mnt/ && b=/mnt/$(basename "$0"); fi && exec "$b" "$@"`

// launchContained is launch in a container-like namespace; it returns the
// target's PID as the host sees it and a map from the target's own thread
// ids to the host's (read once it is ready: its threads exist by then).
func launchContained(t *testing.T, copyBinary bool, argv ...string) (*exec.Cmd, int, map[uint32]uint32, time.Time) {
	t.Helper()
	cmd := exec.Command("unshare", append([]string{"--pid", "--fork", "--mount", "--mount-proc", "/bin/sh", "-c", containerScript}, argv...)...)
	if copyBinary {
		cmd.Env = append(os.Environ(), "COPY=1")
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("contained target did not get ready: %q %v", line, err)
	}
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
	if err != nil || len(strings.Fields(string(kids))) != 1 {
		t.Fatalf("children of unshare: %q %v", kids, err)
	}
	pid, _ := strconv.Atoi(strings.Fields(string(kids))[0])
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	tids := map[uint32]uint32{}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(strings.TrimPrefix(line, "NSpid:")); strings.HasPrefix(line, "NSpid:") && len(f) == 2 {
				host, _ := strconv.Atoi(f[0])
				inner, _ := strconv.Atoi(f[1])
				tids[uint32(inner)] = uint32(host)
			}
		}
	}
	return cmd, pid, tids, started
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestDaemonFindsTargets starts the daemon, then native and Python targets one
// after another: each must be attached within a second of its start, traced
// as its ground-truth log says, and detached when it exits.
func TestDaemonFindsTargets(t *testing.T) {
	needWatchpoints(t)
	cfg := daemon.Defaults()
	cfg.Listen = "127.0.0.1:0"
	f := startFleet(t, cfg)
	script := filepath.Join(repoRoot(t), "pytargets", "run_sglang.py")
	type target struct {
		name string
		argv []string
		py   bool
	}
	targets := []target{
		{"specdemo", []string{demoBinary(t, "specdemo"), "--threads", "2", "--batch", "3", "--requests", "12"}, false},
		{"specdemo-cet", []string{demoBinary(t, "specdemo-cet"), "--threads", "1", "--requests", "8"}, false},
	}
	for _, py := range []string{testinterp.Py312, testinterp.Debian311} {
		if _, err := os.Stat(py); err == nil {
			targets = append(targets, target{"sglang " + py, []string{py, script, "--requests", "8", "--work-scale", "8"}, true})
		}
	}
	if py := testinterp.Py313; fileExists(py) {
		vllm := filepath.Join(repoRoot(t), "pytargets", "run_vllm.py")
		targets = append(targets, target{"vllm " + py, []string{py, vllm, "--requests", "8", "--work-scale", "8"}, true})
	}
	if len(targets) < 3 {
		t.Logf("no Python interpreter for the SGLang target: native targets only")
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "truth.jsonl")
			cmd, started := launch(t, append(tg.argv, "--wait-signal", "--log", log)...)
			pid := cmd.Process.Pid
			at := f.next(t, pid, "attached", 10*time.Second)
			if lag := at.At.Sub(started); lag > machineTime(time.Second) {
				t.Errorf("attached %s after the target started, want within %s", lag, machineTime(time.Second))
			} else {
				t.Logf("attached %s after the target started", lag.Round(time.Millisecond))
			}
			det := f.release(t, cmd)
			spans := f.spansOf(pid)
			if tg.py {
				comparePython(t, spans, pyExpected(t, log), det.Result.Python, 0)
			} else {
				truth := readTruth(t, log)
				if got := det.Result.Read.Events; got != uint64(2*len(truth)) {
					t.Errorf("%d events, want %d", got, 2*len(truth))
				}
				compareWithTruth(t, spans, truth)
			}
			for _, ti := range f.d.Targets() {
				if ti.PID == pid {
					t.Errorf("PID %d still listed after its exit", pid)
				}
			}
		})
	}
	// Other matching processes on the machine may be traced too: the
	// counts must cover ours.
	tot := f.d.Totals()
	if tot.Attaches < uint64(len(targets)) || tot.Detaches < uint64(len(targets)) || tot.AttachFailures != 0 {
		t.Errorf("totals: %d attaches, %d detaches, %d failures; want at least %d, %d, and 0", tot.Attaches, tot.Detaches, tot.AttachFailures, len(targets), len(targets))
	}
	f.stop()
	assertNoProbesLeft(t)
}

// TestDaemonContainers: targets in their own PID and mount namespaces, one
// with its binary visible only inside (a container image), are found,
// resolved through /proc/PID/root and traced exactly; spans name the host's
// PIDs and thread ids.
func TestDaemonContainers(t *testing.T) {
	needWatchpoints(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1) (util-linux) to make namespaces")
	}
	cfg := daemon.Defaults()
	cfg.Listen = "127.0.0.1:0"
	f := startFleet(t, cfg)
	t.Run("native, image-only binary", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "truth.jsonl")
		cmd, pid, tids, started := launchContained(t, true, demoBinary(t, "specdemo-cet"), "--threads", "2", "--batch", "2", "--requests", "10", "--wait-signal", "--log", log)
		at := f.next(t, pid, "attached", 10*time.Second)
		if lag := at.At.Sub(started); lag > machineTime(time.Second) {
			t.Errorf("attached %s after the target started, want within %s", lag, machineTime(time.Second))
		}
		_ = syscall.Kill(pid, syscall.SIGUSR1)
		if code := exitCode(t, cmd); code != 0 {
			t.Fatalf("target exited with %d", code)
		}
		f.next(t, pid, "detached", 20*time.Second)
		truth := readTruth(t, log)
		for i := range truth {
			host, ok := tids[truth[i].TID]
			if !ok {
				t.Fatalf("thread %d of the target has no host id (have %v)", truth[i].TID, tids)
			}
			truth[i].TID = host
		}
		compareWithTruth(t, f.spansOf(pid), truth)
	})
	py := testinterp.Py312
	t.Run("python, own PID namespace", func(t *testing.T) {
		if _, err := os.Stat(py); err != nil {
			t.Skipf("interpreter %s not installed", py)
		}
		log := filepath.Join(t.TempDir(), "truth.jsonl")
		script := filepath.Join(repoRoot(t), "pytargets", "run_sglang.py")
		cmd, pid, tids, _ := launchContained(t, false, py, script, "--requests", "8", "--work-scale", "8", "--wait-signal", "--log", log)
		f.next(t, pid, "attached", 10*time.Second)
		_ = syscall.Kill(pid, syscall.SIGUSR1)
		if code := exitCode(t, cmd); code != 0 {
			t.Fatalf("target exited with %d", code)
		}
		det := f.next(t, pid, "detached", 20*time.Second)
		want := pyExpected(t, log)
		for _, calls := range want {
			for i := range calls {
				host, ok := tids[calls[i].tid]
				if !ok {
					t.Fatalf("thread %d of the target has no host id (have %v)", calls[i].tid, tids)
				}
				calls[i].tid = host
			}
		}
		comparePython(t, f.spansOf(pid), want, det.Result.Python, 0)
	})
	f.stop()
	assertNoProbesLeft(t)
}

// TestDaemonChurn kills targets in the middle of a stage and starts new ones
// while the daemon runs: every one is attached and detached, the killed
// stage ends with an error span, and a target started after the churn is
// still traced exactly.
func TestDaemonChurn(t *testing.T) {
	needRoot(t)
	cfg := daemon.Defaults()
	cfg.Listen = "127.0.0.1:0"
	f := startFleet(t, cfg)
	bin := demoBinary(t, "specdemo-cet")
	for i := range 6 {
		log := filepath.Join(t.TempDir(), "truth.jsonl")
		// Crashes (SIGABRT-like exit 3) in its 3rd verify, mid-stage.
		cmd, _ := launch(t, bin, "--threads", "2", "--requests", "40", "--crash-in-verify", "3", "--wait-signal", "--log", log)
		pid := cmd.Process.Pid
		f.next(t, pid, "attached", 10*time.Second)
		_ = cmd.Process.Signal(syscall.SIGUSR1)
		if code := exitCode(t, cmd); code != 3 {
			t.Fatalf("round %d: target exited with %d, want 3 (died in a verify)", i, code)
		}
		det := f.next(t, pid, "detached", 20*time.Second)
		errored := 0
		for _, s := range f.spansOf(pid) {
			if s.Name() == "spec_verify" && s.Status().Description != "" {
				errored++
			}
		}
		if errored == 0 {
			t.Errorf("round %d: no spec_verify span with an error status for the verify the target died in (%s)", i, det.Reason)
		}
	}
	log := filepath.Join(t.TempDir(), "truth.jsonl")
	cmd, _ := launch(t, bin, "--threads", "2", "--batch", "2", "--requests", "10", "--wait-signal", "--log", log)
	f.next(t, cmd.Process.Pid, "attached", 10*time.Second)
	_ = cmd.Process.Signal(syscall.SIGUSR1)
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("target exited with %d", code)
	}
	f.next(t, cmd.Process.Pid, "detached", 20*time.Second)
	compareWithTruth(t, f.spansOf(cmd.Process.Pid), readTruth(t, log))
	f.stop()
	assertNoProbesLeft(t)
}

// TestDaemonWorkerVariant: an SGLang scheduler found while it still loads,
// before it creates its NGRAM worker. In autumn 2026 (pytargets' autumn2026
// shape, with the specs of that time) it had imported EAGLE V2's module
// already: the daemon attaches with the default sglang spec, then moves to
// sglang-ngram once the NGRAM worker's module appears. Today a scheduler
// imports only its own worker's module, when it creates it: the daemon,
// which attaches a Python spec once its module is imported, attaches once,
// with sglang-ngram (the scheduler's title matches the default spec, which
// must not win). Either way the spans of the run equal the target's log.
func TestDaemonWorkerVariant(t *testing.T) {
	needWatchpoints(t)
	py := testinterp.Py312
	if !fileExists(py) {
		t.Skipf("interpreter %s not installed", py)
	}
	catalog, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	type event struct{ kind, engine string }
	for _, c := range []struct {
		shape  string
		specs  []*probes.Spec
		events []event
	}{
		{"autumn2026", autumnSpecs(t, "sglang", "sglang-ngram"), []event{{"attached", "sglang"}, {"detached", "sglang"}, {"attached", "sglang-ngram"}}},
		{"today", catalog, []event{{"attached", "sglang-ngram"}}},
	} {
		t.Run(c.shape, func(t *testing.T) {
			cfg := daemon.Defaults()
			cfg.Listen = "127.0.0.1:0"
			f := startFleetWith(t, cfg, c.specs)
			log := filepath.Join(t.TempDir(), "truth.jsonl")
			script := filepath.Join(repoRoot(t), "pytargets", "run_sglang.py")
			cmd, _ := launch(t, titled("sglang::scheduler", py, script, "--shape", c.shape, "--worker", "ngram", "--worker-delay", "2",
				"--requests", "8", "--work-scale", "8", "--wait-signal", "--log", log)...)
			pid := cmd.Process.Pid
			for _, want := range c.events {
				if e := f.next(t, pid, want.kind, 10*time.Second); e.Engine != want.engine {
					t.Fatalf("%s with spec %s, want %s", want.kind, e.Engine, want.engine)
				} else if want.kind == "detached" {
					t.Logf("detached: %s", e.Reason)
				}
			}
			det := f.release(t, cmd)
			comparePython(t, f.spansOf(pid), pyExpected(t, log), det.Result.Python, 0)
			f.stop()
			assertNoProbesLeft(t)
		})
	}
}

// TestDaemonRefusesDrift: the daemon, given a spec written for another
// shape of the engine (autumn 2026's, whose draft reads model_worker_batch),
// does not attach it to today's scheduler: one failure naming the arguments
// the function has, counted as spec_mismatch, and no second try.
func TestDaemonRefusesDrift(t *testing.T) {
	needRoot(t)
	py := testinterp.Py312
	if !fileExists(py) {
		t.Skipf("interpreter %s not installed", py)
	}
	cfg := daemon.Defaults()
	cfg.Listen = "127.0.0.1:0"
	f := startFleetWith(t, cfg, autumnSpecs(t, "sglang"), fastRescan)
	script := filepath.Join(repoRoot(t), "pytargets", "run_sglang.py")
	cmd, _ := launch(t, titled("sglang::scheduler", py, script, "--requests", "4", "--wait-signal",
		"--log", filepath.Join(t.TempDir(), "truth.jsonl"))...)
	pid := cmd.Process.Pid
	e := f.next(t, pid, "failed", 10*time.Second)
	want := "stage draft: EagleDraftWorker.draft has no argument model_worker_batch (its arguments: self, batch"
	if !strings.Contains(e.Reason, want) {
		t.Fatalf("failed for %q, want %q", e.Reason, want)
	}
	// Another look would fail the same way: none is made.
	f.noLookAgain(t, pid, 2)
	if n := f.d.Totals().Rejected["spec_mismatch"]; n != 1 {
		t.Errorf("spec_mismatch counted %d times, want 1", n)
	}
	f.stop()
	assertNoProbesLeft(t)
}

// fastRescan has the daemon read /proc again in full every 100ms, so that a
// test sees rescans happen instead of waiting 30s for one.
func fastRescan(o *daemon.Options) { o.RescanEvery = 100 * time.Millisecond }

// noLookAgain waits for n full rescans of /proc while pid lives and fails if
// the daemon took it up again: a new candidate is counted as discovered
// during the rescan that finds it, before the rescan is counted.
func (f *fleet) noLookAgain(t *testing.T, pid, n int) {
	t.Helper()
	before := f.d.Totals()
	for deadline := time.Now().Add(20 * time.Second); f.d.Totals().Rescans < before.Rescans+uint64(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %d rescans of /proc within 20s", n)
		}
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("PID %d is gone: the rescans prove nothing (%v)", pid, err)
	}
	after := f.d.Totals()
	if after.Discovered != before.Discovered || after.Attaches != before.Attaches {
		t.Errorf("PID %d taken up again: discovered %d -> %d, attaches %d -> %d", pid, before.Discovered, after.Discovered, before.Attaches, after.Attaches)
	}
	for {
		select {
		case e := <-f.events:
			if e.PID == pid {
				t.Fatalf("after the refusal: %s %s (%s)", e.Kind, e.Engine, e.Reason)
			}
		default:
			return
		}
	}
}

// TestDaemonWrongOffsets: a value that fails its check on the first calls
// (as one read through another build's offsets does) stops that session
// with the check's error before any span is exported; the process is counted
// as wrong_offsets and not attached again while it lives.
func TestDaemonWrongOffsets(t *testing.T) {
	needRoot(t)
	src, err := probes.CatalogSource("demo")
	if err != nil {
		t.Fatal(err)
	}
	// The demo drafts 4 tokens a call: a bound of 1,000 fails every call.
	good := "num_drafts: {at: exit, from: ret, type: int, size: 4}"
	if !strings.Contains(string(src), good) {
		t.Fatalf("the demo spec has no %q to edit", good)
	}
	spec, err := probes.Parse("wrong-demo.yaml", []byte(strings.Replace(string(src), good,
		"num_drafts: {at: exit, from: ret, type: int, size: 4, check: {min: 1000}}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := daemon.Defaults()
	cfg.Listen = "127.0.0.1:0"
	f := startFleetWith(t, cfg, []*probes.Spec{spec}, fastRescan)
	// Enough requests to outlive the refusal and the rescans after it.
	d := startDemo(t, demoBinary(t, "specdemo-cet"), "--threads", "1", "--batch", "1", "--requests", "2000")
	pid := d.cmd.Process.Pid
	f.next(t, pid, "attached", 10*time.Second)
	d.release(t)
	e := f.next(t, pid, "detached", 20*time.Second)
	for _, want := range []string{"stage draft: num_drafts read 4", "the offsets do not fit this build"} {
		if !strings.Contains(e.Reason, want) {
			t.Fatalf("detached for %q, want %q in it", e.Reason, want)
		}
	}
	if n := f.d.Totals().Rejected["wrong_offsets"]; n != 1 {
		t.Errorf("wrong_offsets counted %d times, want 1", n)
	}
	f.noLookAgain(t, pid, 2)
	if spans := f.spansOf(pid); len(spans) != 0 {
		t.Errorf("%d spans exported from values that failed their check, want none", len(spans))
	}
	f.stop()
	assertNoProbesLeft(t)
}
