package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/daemon"
	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

// The engine variants beyond the default specs: the autumn-2026 shapes of
// pytargets with the specs of that time, vLLM's other speculators and V1
// runner, and SGLang's launcher, which must never be taken for a scheduler.

// autumnSpecs are the catalog specs as they were for pytargets' autumn-2026
// shapes (integration/testdata/autumn2026), in detection order.
func autumnSpecs(t *testing.T, engines ...string) []*probes.Spec {
	t.Helper()
	var out []*probes.Spec
	for _, e := range engines {
		s, err := probes.Load(filepath.Join(repoRoot(t), "integration", "testdata", "autumn2026", e+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestSGLangAutumnShapes runs the SGLang-shaped target as SGLang was in
// autumn 2026 (ModelWorkerBatch arguments, NGRAM leaving forward_mode alone,
// EAGLE V2's module imported whatever the worker) with each worker it had,
// detects among the specs of that time and compares every span with the log.
func TestSGLangAutumnShapes(t *testing.T) {
	_, script := pyTarget(t, "sglang", "run_sglang.py")
	specs := autumnSpecs(t, "sglang", "sglang-standalone", "sglang-frozen-kv-mtp", "sglang-multi-layer-eagle", "sglang-ngram")
	for _, w := range []struct {
		worker, engine string
		when           bool
	}{
		{"eagle_v2", "sglang", false},
		{"standalone", "sglang-standalone", false},
		{"frozen_kv_mtp", "sglang-frozen-kv-mtp", false},
		{"multi_layer_eagle", "sglang-multi-layer-eagle", false},
		{"ngram", "sglang-ngram", true},
	} {
		for _, py := range interpreters {
			t.Run(w.worker+"/"+testinterp.Name(py), func(t *testing.T) {
				cmd, log := startPyTarget(t, script, py, "--shape", "autumn2026", "--worker", w.worker)
				spec := detectPython(t, specs, cmd.Process.Pid)
				if spec.Engine != w.engine {
					t.Fatalf("detected %s (%s), want %s", spec.Engine, spec.Worker, w.engine)
				}
				res := traceCompare(t, spec, cmd, log, nil, 0)
				if w.when && (res.Python == nil || res.Python.Skipped == 0) {
					t.Errorf("no prefill call left out by when: %+v", res.Python)
				}
			})
		}
	}
}

// TestCatalogSurvivesRename: the catalog's SGLang specs name the draft's
// argument as [batch, model_worker_batch], so they trace the autumn-2026
// shapes as they do today's: every span equal to the log.
func TestCatalogSurvivesRename(t *testing.T) {
	_, script := pyTarget(t, "sglang", "run_sglang.py")
	for _, w := range []struct{ worker, engine string }{
		{"eagle_v2", "sglang"},
		{"standalone", "sglang-standalone"},
		{"frozen_kv_mtp", "sglang-frozen-kv-mtp"},
		{"multi_layer_eagle", "sglang-multi-layer-eagle"},
	} {
		spec, err := probes.Lookup(w.engine)
		if err != nil {
			t.Fatal(err)
		}
		for _, py := range []string{interpreters[0], testinterp.Py312} {
			t.Run(w.worker+"/"+testinterp.Name(py), func(t *testing.T) {
				cmd, log := startPyTarget(t, script, py, "--shape", "autumn2026", "--worker", w.worker)
				traceCompare(t, spec, cmd, log, nil, 0)
			})
		}
	}
}

// TestDriftRefused: a spec written for another shape of the program (the
// autumn-2026 SGLang spec, whose draft reads model_worker_batch) is refused
// at attach against today's target, naming the arguments the function has,
// and nothing is left armed.
func TestDriftRefused(t *testing.T) {
	_, script := pySpec(t, "sglang", "run_sglang.py")
	spec := autumnSpecs(t, "sglang")[0]
	cmd, _ := startPyTarget(t, script, testinterp.Py312)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := tracer.Run(ctx, tracer.Config{PID: cmd.Process.Pid, Spec: spec, ImportWait: 5 * time.Second})
	want := "stage draft: EagleDraftWorker.draft has no argument model_worker_batch (its arguments: self, batch"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("attach: %v\nwant an error containing %q", err, want)
	}
	t.Log(err)
	assertNoProbesLeft(t)
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Fatalf("the target is gone: %v", err)
	}
}

// TestVLLMAutumnShape: the vLLM-shaped target as Model Runner V2 was in
// autumn 2026, with the spec of that time.
func TestVLLMAutumnShape(t *testing.T) {
	_, script := pyTarget(t, "vllm", "run_vllm.py")
	spec := autumnSpecs(t, "vllm")[0]
	for _, py := range interpreters {
		t.Run(testinterp.Name(py), func(t *testing.T) {
			sglangRun(t, spec, script, py, "--shape", "autumn2026")
		})
	}
}

// TestVLLMVariants runs the vLLM-shaped target with each Model Runner V2
// speculator besides EAGLE (TestVLLMTarget), with the V1 GPUModelRunner,
// and with dummy runs between the steps (an idle data-parallel rank's),
// detects the spec by the speculator's or runner's module and compares every
// span with the log: dummy runs make no span.
func TestVLLMVariants(t *testing.T) {
	_, script := pyTarget(t, "vllm", "run_vllm.py")
	catalog, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name, engine string
		args         []string
	}{
		{"mtp", "vllm-mtp", []string{"--speculator", "mtp"}},
		{"gemma4", "vllm-gemma4", []string{"--speculator", "gemma4"}},
		{"dflash", "vllm-dflash", []string{"--speculator", "dflash"}},
		{"dspark", "vllm-dspark", []string{"--speculator", "dspark"}},
		{"multi_module_mtp", "vllm-multi-module-mtp", []string{"--speculator", "multi_module_mtp"}},
		// vLLM main (02abe7013453): n-gram MTP calls the traced propose nested in its
		// own (one draft span a step), n-gram on the GPU, a standalone draft model,
		// and DFlash's two variants named for themselves.
		{"ngram_mtp", "vllm-mtp", []string{"--speculator", "ngram_mtp"}},
		{"ngram_gpu", "vllm-ngram", []string{"--speculator", "ngram_gpu"}},
		{"standalone", "vllm-standalone", []string{"--speculator", "standalone"}},
		{"dflash2", "vllm-dflash2", []string{"--speculator", "dflash2"}},
		{"lilicorr", "vllm-lilicorr", []string{"--speculator", "lilicorr"}},
		{"v1", "vllm-v1", []string{"--runner", "v1"}},
		{"dummy", "vllm", []string{"--dummy-every", "3"}},
		// A step that samples more than one token besides the accepted
		// drafts: the count is the length less the scheduler's
		// num_sampled_tokens_per_step, read with it.
		{"sampled2", "vllm", []string{"--sampled-per-step", "2"}},
		{"v1-sampled3", "vllm-v1", []string{"--runner", "v1", "--sampled-per-step", "3"}},
	} {
		for _, py := range interpreters {
			t.Run(v.name+"/"+testinterp.Name(py), func(t *testing.T) {
				cmd, log := startPyTarget(t, script, py, v.args...)
				spec := detectPython(t, catalog, cmd.Process.Pid)
				if spec.Engine != v.engine {
					t.Fatalf("detected %s (%s), want %s", spec.Engine, spec.Worker, v.engine)
				}
				// A dummy run's verify and draft are left out by when: a
				// span for a _dummy_req_<i> would match no call of the log.
				res, matched, total := traceCompareCounted(t, spec, cmd, log, nil, 0)
				requireEvery(t, res, matched, total)
				if v.name == "dummy" && (res.Python == nil || res.Python.Skipped == 0) {
					t.Errorf("no dummy run left out by when: %+v", res.Python)
				}
			})
		}
	}
}

// TestVLLMMainDetected: vLLM main's speculators (spec_decode/__init__.py at
// 02abe7013453), each in a live mirror: detected as its own spec, and every
// stage of that spec resolved in the process (probes check reads memory,
// arms nothing; the traced runs are TestVLLMVariants).
func TestVLLMMainDetected(t *testing.T) {
	needRoot(t)
	script := filepath.Join(repoRoot(t), "pytargets", "run_vllm.py")
	for _, v := range []struct{ speculator, engine, worker string }{
		{"ngram_mtp", "vllm-mtp", "NgramMTPSpeculator"},
		{"ngram_gpu", "vllm-ngram", "NgramGPUSpeculator"},
		{"standalone", "vllm-standalone", "StandaloneARSpeculator"},
		{"dflash2", "vllm-dflash2", "DFlash2Speculator"},
		{"lilicorr", "vllm-lilicorr", "LiLiCorrSpeculator"},
	} {
		for _, py := range interpreters {
			if !fileExists(py) {
				continue
			}
			t.Run(v.speculator+"/"+testinterp.Name(py), func(t *testing.T) {
				cmd, _ := startPyTarget(t, script, py, "--speculator", v.speculator)
				code, out := cli(t, nil, "probes", "check", "--pid", itoa(cmd.Process.Pid))
				if code != 0 || !strings.Contains(out, "engine detected: "+v.engine+" ") || !strings.Contains(out, v.worker) {
					t.Fatalf("probes check: exit %d, want %s (%s) detected:\n%s", code, v.engine, v.worker, out)
				}
				for _, stage := range []string{"draft", "verify", "accept"} {
					if !regexp.MustCompile(`(?m)^\s+ok\s+` + stage + `\s`).MatchString(out) {
						t.Errorf("%s not resolved:\n%s", stage, out)
					}
				}
			})
		}
	}
}

// TestDetectVariants: detection on the modules each variant's process has
// imported (as read from the real pytargets processes by the tests above,
// written out here): the variant that imports several others' modules is
// taken for itself, and a command line alone names the default spec only
// for a scheduler, never for the launcher.
func TestDetectVariants(t *testing.T) {
	catalog, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	const spec = "sglang.srt.speculative."
	const mrv2 = "vllm.v1.worker.gpu.spec_decode."
	for _, c := range []struct {
		name, cmdline string
		modules       []string
		want          string // "" for none
	}{
		{"sglang scheduler loading", "sglang::scheduler", nil, "sglang"},
		{"sglang scheduler TP0 loading", "sglang::scheduler_TP0", nil, "sglang"},
		{"sglang scheduler TP1: another rank", "sglang::scheduler_TP1", []string{spec + "eagle_worker_v2"}, ""},
		{"sglang ngram DP1 TP0", "sglang::scheduler_DP1_TP0", []string{spec + "ngram_worker"}, "sglang-ngram"},
		{"sglang ngram DP1 TP1: another rank", "sglang::scheduler_DP1_TP1", []string{spec + "ngram_worker"}, ""},
		{"sglang launcher", "python3 -m sglang.launch_server --model-path m --speculative-algorithm EAGLE",
			[]string{"sglang.srt.server_args", "sglang.srt.entrypoints.http_server"}, ""},
		{"eagle v2", "sglang::scheduler", []string{spec + "eagle_worker_v2"}, "sglang"},
		{"ngram", "sglang::scheduler", []string{spec + "ngram_worker"}, "sglang-ngram"},
		{"hybrid", "sglang::scheduler", []string{spec + "hybrid_controller", spec + "ngram_worker", spec + "eagle_worker_v2"}, "sglang-hybrid"},
		// HYBRID is branch-only (sgl-project/sglang#37237): a main-branch server never
		// imports hybrid_controller, so it never gets the branch's spec, whatever else
		// it has imported.
		{"main ngram", "sglang::scheduler", []string{spec + "ngram_worker", spec + "base_spec_worker", spec + "ngram_info"}, "sglang-ngram"},
		{"main eagle and ngram", "sglang::scheduler", []string{spec + "ngram_worker", spec + "eagle_worker_v2"}, "sglang-ngram"},
		{"main eagle", "sglang::scheduler", []string{spec + "eagle_worker_v2", spec + "eagle_worker_common"}, "sglang"},
		{"frozen kv mtp", "sglang::scheduler", []string{spec + "frozen_kv_mtp_worker_v2", spec + "eagle_worker_v2"}, "sglang-frozen-kv-mtp"},
		{"standalone", "sglang::scheduler", []string{spec + "standalone_worker_v2", spec + "eagle_worker_v2"}, "sglang-standalone"},
		{"dflash", "sglang::scheduler", []string{spec + "dflash_worker_v2", spec + "dspark_components.dspark_draft"}, "sglang-dflash"},
		{"dspark", "sglang::scheduler", []string{spec + "dspark_components.dspark_worker_v2", spec + "dspark_components.dspark_draft", spec + "dflash_info_v2"}, "sglang-dspark"},
		{"uno", "sglang::scheduler", []string{spec + "uno_worker_v2", spec + "eagle_worker_common"}, "sglang-uno"},
		{"vllm eagle", "VLLM::EngineCore", []string{mrv2 + "eagle.speculator", mrv2 + "target_dependent_ar.speculator"}, "vllm"},
		// vLLM main (spec_decode/__init__.py 02abe7013453): each speculator's module, with the
		// modules it imports (docs/upstream.md).
		{"vllm mtp", "VLLM::EngineCore", []string{mrv2 + "mtp.speculator", mrv2 + "ngram.speculator", mrv2 + "target_dependent_ar.speculator"}, "vllm-mtp"},
		{"vllm ngram gpu", "VLLM::EngineCore", []string{mrv2 + "ngram.speculator"}, "vllm-ngram"},
		{"vllm standalone", "VLLM::EngineCore", []string{mrv2 + "standalone_ar.speculator"}, "vllm-standalone"},
		{"vllm dflash", "VLLM::EngineCore", []string{mrv2 + "dflash.speculator"}, "vllm-dflash"},
		{"vllm dflash2", "VLLM::EngineCore", []string{mrv2 + "dflash2.speculator", mrv2 + "dflash.speculator"}, "vllm-dflash2"},
		{"vllm lilicorr", "VLLM::EngineCore", []string{mrv2 + "lilicorr.speculator", mrv2 + "dflash2.speculator", mrv2 + "dflash.speculator"}, "vllm-lilicorr"},
		{"vllm gemma4", "VLLM::EngineCore", []string{mrv2 + "gemma4.speculator", mrv2 + "eagle.speculator"}, "vllm-gemma4"},
		{"vllm dspark", "VLLM::EngineCore", []string{mrv2 + "dspark.speculator", mrv2 + "dflash.speculator"}, "vllm-dspark"},
		{"vllm v1 runner", "VLLM::EngineCore", []string{"vllm.v1.worker.gpu_model_runner", "vllm.v1.spec_decode.eagle"}, "vllm-v1"},
		{"vllm both runners", "VLLM::EngineCore", []string{"vllm.v1.worker.gpu_model_runner", mrv2 + "eagle.speculator"}, "vllm"},
		{"vllm api server", "VLLM::APIServer_0", []string{"vllm.entrypoints.openai.api_server"}, ""},
		{"vllm worker TP0", "VLLM::Worker_TP0", []string{mrv2 + "eagle.speculator"}, "vllm"},
		// vLLM's stages are placed (process:): a session from rank 1 traces rank 0; the
		// daemon starts none from it (tracer.CheckLead, TestDaemonVLLMTensorParallel).
		{"vllm worker TP1", "VLLM::Worker_TP1", []string{mrv2 + "eagle.speculator"}, "vllm"},
		{"vllm worker DP1 TP0", "VLLM::Worker_DP1_TP0", []string{mrv2 + "mtp.speculator"}, "vllm-mtp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			has := func(m string) bool {
				for _, x := range c.modules {
					if x == m {
						return true
					}
				}
				return false
			}
			got, err := probes.Detect(catalog, probes.Process{Exe: "python3.12", Cmdline: c.cmdline, Title: strings.Fields(c.cmdline)[0], HasModule: has})
			switch {
			case err != nil && c.want != "":
				t.Errorf("%v, want %s", err, c.want)
			case got == nil && c.want != "":
				t.Errorf("nothing detected, want %s", c.want)
			case got != nil && got.Engine != c.want:
				t.Errorf("detected %s, want %q", got.Engine, c.want)
			case strings.HasSuffix(c.name, "another rank") && !errors.As(err, new(*probes.OtherRankError)):
				t.Errorf("%v, want an other-rank error", err)
			}
		})
	}
}

// titled is argv run with argv[0] set to title (through bash's exec -a),
// as a process that names itself with setproctitle shows in its command line.
func titled(title string, argv ...string) []string {
	return append([]string{"/bin/bash", "-c", `exec -a "$0" "$@"`, title}, argv...)
}

// launcher is pytargets' sglang.launch_server with its scheduler ranks.
type launcher struct {
	cmd     *exec.Cmd
	ranks   []int
	rank    map[int]int    // each scheduler's TP rank, by PID
	logs    map[int]string // each rank's ground-truth log
	drained chan struct{}  // closed when every process has closed stdout
}

// startLauncher starts python -m sglang.launch_server with tp ranks, each
// parked until SIGUSR1, and returns once every rank is ready.
func startLauncher(t *testing.T, py string, tp int) *launcher {
	t.Helper()
	if _, err := os.Stat(py); err != nil {
		t.Skipf("interpreter %s not installed", py)
	}
	log := filepath.Join(t.TempDir(), "truth.jsonl")
	cmd := exec.Command(py, "-m", "sglang.launch_server", "--tp-size", strconv.Itoa(tp),
		"--wait-signal", "--requests", "8", "--work-scale", "8", "--log", log)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repoRoot(t), "pytargets"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &launcher{cmd: cmd}
	t.Cleanup(func() {
		for _, pid := range l.ranks {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	r := bufio.NewReader(stdout)
	for len(l.ranks) < tp {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("launcher: %v after %q", err, line)
		}
		var pid int
		if _, err := fmt.Sscanf(line, "ready pid=%d", &pid); err == nil {
			l.ranks = append(l.ranks, pid)
		}
	}
	l.logs, l.rank = map[int]string{}, map[int]int{}
	for _, pid := range l.ranks {
		l.rank[pid] = rankOf(t, pid, tp)
		l.logs[pid] = log
		if tp > 1 {
			l.logs[pid] = fmt.Sprintf("%s.tp%d", log, l.rank[pid])
		}
	}
	l.drained = make(chan struct{})
	go func() { _, _ = r.WriteTo(os.Stdout); close(l.drained) }()
	return l
}

// pidOf is the PID of the scheduler of TP rank r.
func (l *launcher) pidOf(t *testing.T, r int) int {
	for pid, rank := range l.rank {
		if rank == r {
			return pid
		}
	}
	t.Fatalf("no scheduler of TP rank %d among %v", r, l.rank)
	return 0
}

// wait waits for the launcher's exit, once its ranks have been released.
func (l *launcher) wait(t *testing.T) {
	t.Helper()
	select {
	case <-l.drained:
	case <-time.After(20 * time.Second):
		t.Fatal("the launcher's processes did not end")
	}
	if err := l.cmd.Wait(); err != nil {
		t.Fatalf("launcher: %v", err)
	}
}

// rankOf is the TP rank of the scheduler pid, told by its title:
// sglang::scheduler with one rank, sglang::scheduler_TP<r> with more.
func rankOf(t *testing.T, pid int, tp int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	title, _, _ := strings.Cut(string(b), "\x00")
	if tp == 1 {
		if title != "sglang::scheduler" {
			t.Fatalf("rank title %q, want sglang::scheduler", title)
		}
		return 0
	}
	var r int
	if _, err := fmt.Sscanf(title, "sglang::scheduler_TP%d", &r); err != nil || r < 0 || r >= tp {
		t.Fatalf("rank title %q, want sglang::scheduler_TP<r> with r < %d", title, tp)
	}
	return r
}

// TestSGLangLauncher: of SGLang's processes with TP = 2, the launcher
// (python -m sglang.launch_server: the HTTP server, no speculative worker)
// matches no spec; TP rank 1 (sglang::scheduler_TP1), which runs the same
// requests as rank 0, is not traced: detection says so, and attach refuses
// it naming rank 0's PID and --any-rank; rank 0 is detected and traced
// exactly with its own log, its ranks on the resource.
func TestSGLangLauncher(t *testing.T) {
	needWatchpoints(t)
	catalog, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	py := testinterp.Py312
	l := startLauncher(t, py, 2)
	if spec, _ := detect(t, catalog, l.cmd.Process.Pid); spec != nil {
		t.Fatalf("the launcher was taken for %s", spec.Engine)
	}
	traced, other := l.pidOf(t, 0), l.pidOf(t, 1)
	var rank *probes.OtherRankError
	if spec, err := detect(t, catalog, other); spec != nil || !errors.As(err, &rank) || rank.Rank.Value != 1 {
		t.Fatalf("TP rank 1 detected as %v (%v), want the other rank", spec, err)
	}
	code, out := cli(t, nil, "attach", "--pid", strconv.Itoa(other), "--duration", "1s")
	for _, want := range []string{`"sglang::scheduler_TP1" is tp rank 1, and spec sglang traces tp rank 0 only`,
		fmt.Sprintf("its group's traced rank is PID %d (sglang::scheduler_TP0)", traced), "--any-rank"} {
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("attach to TP rank 1: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	// Untraced: let it run to its end.
	_ = syscall.Kill(other, syscall.SIGUSR1)
	spec := detectPython(t, catalog, traced)
	if spec.Engine != "sglang" {
		t.Fatalf("rank detected as %s, want sglang", spec.Engine)
	}
	p, err := os.FindProcess(traced)
	if err != nil {
		t.Fatal(err)
	}
	traceCompare(t, spec, &exec.Cmd{Process: p}, l.logs[traced], nil, 0)
	l.wait(t)
}

// TestDaemonSkipsLauncher: with TP = 2 the daemon attaches to TP rank 0
// only, never to the launcher or to rank 1 (counted as other_rank): every
// span it exports is rank 0's, once, equal to rank 0's log, with
// sglang.tp_rank on its resource.
func TestDaemonSkipsLauncher(t *testing.T) {
	needWatchpoints(t)
	cfg := daemon.Defaults()
	cfg.Listen = "127.0.0.1:0"
	f := startFleet(t, cfg)
	l := startLauncher(t, testinterp.Py312, 2)
	traced := l.pidOf(t, 0)
	ours := map[int]bool{l.cmd.Process.Pid: true}
	for _, pid := range l.ranks {
		ours[pid] = true
	}
	next := func(kind string, within time.Duration) daemon.Event {
		return f.nextOf(t, ours, traced, kind, within)
	}
	if e := next("attached", 10*time.Second); e.Engine != "sglang" {
		t.Errorf("rank 0 attached with %s, want sglang", e.Engine)
	}
	for _, pid := range l.ranks {
		_ = syscall.Kill(pid, syscall.SIGUSR1)
	}
	l.wait(t)
	det := next("detached", 20*time.Second)
	if det.Result == nil || !det.Result.TargetExited {
		t.Fatalf("rank 0 detached for %q, want its exit", det.Reason)
	}
	if n := f.d.Totals().Rejected["other_rank"]; n != 1 {
		t.Errorf("other_rank counted %d times, want 1 (TP rank 1)", n)
	}
	all := f.mem.GetSpans().Snapshots()
	mine := f.spansOf(traced)
	if len(all) != len(mine) {
		t.Errorf("%d spans exported, %d of them rank 0's: another process was traced", len(all), len(mine))
	}
	for _, s := range mine[:min(1, len(mine))] {
		if !slices.Contains(s.Resource().Attributes(), attribute.Int("sglang.tp_rank", 0)) {
			t.Errorf("rank 0's resource lacks sglang.tp_rank=0: %v", s.Resource().Attributes())
		}
	}
	comparePython(t, mine, pyExpected(t, l.logs[traced]), det.Result.Python, 0)
	f.stop()
	assertNoProbesLeft(t)
}

// TestAttachWaitsForWorker: attach without --engine to a scheduler still
// loading its model (titled sglang::scheduler, its worker's module not
// imported) matches the default spec by title only. For workers that never
// import the default's module, tracing with it would wait for a module that
// never loads: detection says the variant is not known yet, with no wait
// (probes check) returns the default, with a short one fails naming
// --import-wait and --engine, and with a long one picks the variant as soon
// as the worker is created; the spans then equal the log.
func TestAttachWaitsForWorker(t *testing.T) {
	_, script := pyTarget(t, "sglang", "run_sglang.py")
	catalog, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	py := interpreters[2]
	for _, w := range []struct{ worker, engine string }{
		{"multi_layer_eagle", "sglang-multi-layer-eagle"},
		{"uno", "sglang-uno"},
	} {
		t.Run(w.worker, func(t *testing.T) {
			// --worker-signal: the stack is imported, the worker is made at SIGUSR2.
			cmd, log, out := startPyUntil(t, "loading", "sglang::scheduler", script, py, "--worker-signal", "--worker", w.worker)
			pid := cmd.Process.Pid

			var said []string
			spec, _, err := tracer.Detect(catalog, pid, false, 0, func(m string) { said = append(said, m) })
			if err != nil || spec == nil || spec.Engine != "sglang" {
				t.Fatalf("no wait: detected %v, %v; want the default spec sglang", spec, err)
			}
			if len(said) != 1 || !strings.Contains(said[0], "by its title only") || !strings.Contains(said[0], "not known yet") {
				t.Fatalf("no wait: said %q, want that the variant is not known yet", said)
			}

			spec, _, err = tracer.Detect(catalog, pid, false, 300*time.Millisecond, func(string) {})
			if spec != nil || err == nil || !strings.Contains(err.Error(), "--import-wait") || !strings.Contains(err.Error(), "--engine sglang") {
				t.Fatalf("short wait: detected %v, %v; want an error naming --import-wait and --engine sglang", spec, err)
			}

			waiting := make(chan string, 1)
			type detected struct {
				spec *probes.Spec
				err  error
			}
			done := make(chan detected, 1)
			go func() {
				s, _, err := tracer.Detect(catalog, pid, false, 60*time.Second, func(m string) { waiting <- m })
				done <- detected{s, err}
			}()
			select {
			case m := <-waiting:
				t.Log(m)
			case d := <-done:
				t.Fatalf("detection ended before it waited: %v, %v", d.spec, d.err)
			}
			if err := cmd.Process.Signal(syscall.SIGUSR2); err != nil { // the model is loaded
				t.Fatal(err)
			}
			d := <-done
			if d.err != nil || d.spec == nil || d.spec.Engine != w.engine {
				t.Fatalf("after the worker's import: detected %v, %v; want %s", d.spec, d.err, w.engine)
			}
			if line, _ := out.ReadString('\n'); !strings.HasPrefix(line, "ready") {
				t.Fatalf("target not ready: %q", line)
			}
			traceCompare(t, d.spec, cmd, log, nil, 0)
		})
	}
}
