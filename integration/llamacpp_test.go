package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

// llamaServers are the llama-server builds to test: SPECPROBE_LLAMA_SERVER, or
// the shared and static builds docs/llamacpp-notes.md describes. llama.cpp is
// not part of this repository; without a build the test skips and says so.
func llamaServers() []string {
	if p := os.Getenv("SPECPROBE_LLAMA_SERVER"); p != "" {
		return []string{p}
	}
	var out []string
	for _, p := range []string{"/work/llama/build/bin/llama-server", "/work/llama/build-static/bin/llama-server", "/work/llama/src/build/bin/llama-server"} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// needLlama skips a test without root, a llama-server build or the models.
func needLlama(t *testing.T) (servers []string, models string) {
	needRoot(t)
	servers = llamaServers()
	if len(servers) == 0 {
		t.Skip("no llama-server build found: set SPECPROBE_LLAMA_SERVER to one (docs/llamacpp-notes.md says how to build it)")
	}
	return servers, llamaModels(t)
}

// llamaModels is the directory of the tiny model pair: SPECPROBE_LLAMA_MODELS,
// or shared/data/llamacpp-tiny beside the checkout (or beside the worktrees'
// directory); the test skips without it.
func llamaModels(t *testing.T) string {
	dirs := []string{os.Getenv("SPECPROBE_LLAMA_MODELS")}
	for _, up := range []string{"..", "../.."} {
		dirs = append(dirs, filepath.Join(repoRoot(t), up, "shared", "data", "llamacpp-tiny"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "tiny-target.gguf")); err == nil {
			return d
		}
	}
	t.Skipf("the tiny model pair is in none of %v: set SPECPROBE_LLAMA_MODELS", dirs[1:])
	return ""
}

var (
	acceptedLine = regexp.MustCompile(`id\s+(\d+) \| task (\d+) \| accepted\s+(\d+)/\s*(\d+) draft tokens`)
	launchLine   = regexp.MustCompile(`launch_slot_: id\s+(\d+) \| task (\d+) \| processing task`)
)

type llamaStep struct{ slot, accepted, drafted int64 }

// TestLlamaServer traces a real llama-server doing speculative decoding with
// the catalog spec and compares, per task, every verify with the server's own
// `accepted N/M draft tokens` lines and the response's timings.
func TestLlamaServer(t *testing.T) {
	servers, models := needLlama(t)
	for _, server := range servers {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(server))), func(t *testing.T) {
			testLlamaServer(t, server, models, catalogSpec(t, "llamacpp"))
		})
	}
}

// llamaServerProc is a llama-server started for a test, with speculative
// decoding on two slots; it is killed when the test ends.
type llamaServerProc struct {
	cmd           *exec.Cmd
	base, logPath string
}

func startLlama(t *testing.T, server, models string) *llamaServerProc {
	t.Helper()
	port := freePort(t)
	logPath := filepath.Join(t.TempDir(), "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(server, "-m", filepath.Join(models, "tiny-target.gguf"), "-md", filepath.Join(models, "tiny-draft.gguf"),
		"--spec-type", "draft-simple", "--spec-draft-n-max", "4", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"-np", "2", "-c", "4096", "-t", "1", "--no-webui")
	cmd.Env = append(os.Environ(), "LLAMA_TRACE=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &llamaServerProc{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), logPath: logPath}
	waitHealthy(t, p.base, cmd)
	return p
}

type llamaResponse struct {
	Slot    int64 `json:"id_slot"`
	Timings struct {
		DraftN         int64 `json:"draft_n"`
		DraftNAccepted int64 `json:"draft_n_accepted"`
	} `json:"timings"`
}

// complete sends two requests at once (both slots share each draft and
// verify call) and returns their responses.
func (p *llamaServerProc) complete(t *testing.T) []llamaResponse {
	var responses []llamaResponse
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, prompt := range []string{"The quick brown fox", "Once upon a time"} {
		wg.Add(1)
		go func(prompt string) {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": 32, "temperature": 0, "cache_prompt": false})
			resp, err := http.Post(p.base+"/completion", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Errorf("completion: %v", err)
				return
			}
			defer resp.Body.Close()
			var r llamaResponse
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
				t.Errorf("completion response: %v", err)
				return
			}
			mu.Lock()
			responses = append(responses, r)
			mu.Unlock()
		}(prompt)
	}
	wg.Wait()
	return responses
}

func testLlamaServer(t *testing.T, server, models string, spec *probes.Spec) {
	p := startLlama(t, server, models)
	cmd, logPath := p.cmd, p.logPath
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var responses []llamaResponse
	runCtx, stopTracing := context.WithCancel(ctx)
	release := func() {
		responses = p.complete(t)
		stopTracing()
	}
	_, spans := traceRun(t, runCtx, tracer.Config{PID: cmd.Process.Pid, Spec: spec, SkipEndbr: true}, release)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(responses) != 2 {
		t.Fatalf("%d responses, want 2", len(responses))
	}

	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]llamaStep{}
	for _, m := range acceptedLine.FindAllStringSubmatch(string(log), -1) {
		want[m[2]] = append(want[m[2]], llamaStep{atoi(m[1]), atoi(m[3]), atoi(m[4])})
	}
	slotTask := map[int64]string{}
	for _, m := range launchLine.FindAllStringSubmatch(string(log), -1) {
		slotTask[atoi(m[1])] = m[2]
	}
	if len(want) == 0 {
		t.Fatalf("the server logged no accepted-drafts line (LLAMA_TRACE=1 not honoured?)")
	}

	got := map[string][]llamaStep{}
	drafts := map[string]int{}
	type timed struct {
		start time.Time
		step  llamaStep
	}
	verifies := map[string][]timed{}
	for _, s := range spans {
		a := attrs(s)
		rid := a["rid"].AsString()
		switch s.Name() {
		case "spec_draft":
			drafts[rid]++
		case "spec_verify":
			verifies[rid] = append(verifies[rid], timed{s.StartTime(), llamaStep{a["specprobe.slot_id"].AsInt64(), a["num_correct_drafts"].AsInt64(), a["num_drafts"].AsInt64()}})
		}
	}
	for rid, v := range verifies {
		sort.Slice(v, func(i, j int) bool { return v[i].start.Before(v[j].start) })
		for _, x := range v {
			got[rid] = append(got[rid], x.step)
		}
	}
	if fmt.Sprint(sortedMap(got)) != fmt.Sprint(sortedMap(want)) {
		t.Errorf("per task (slot, accepted, drafted) of each verify:\n spans %v\n log   %v", sortedMap(got), sortedMap(want))
	}
	for task, steps := range want {
		if drafts[task] != len(steps) {
			t.Errorf("task %s: %d spec_draft spans for %d steps", task, drafts[task], len(steps))
		}
	}
	for _, r := range responses {
		task := slotTask[r.Slot]
		var acc, dr int64
		for _, st := range got[task] {
			acc += st.accepted
			dr += st.drafted
		}
		if acc != r.Timings.DraftNAccepted || dr != r.Timings.DraftN {
			t.Errorf("slot %d task %s: spans say %d/%d accepted, the response's timings %d/%d", r.Slot, task, acc, dr, r.Timings.DraftNAccepted, r.Timings.DraftN)
		}
	}
	t.Logf("per task (slot, accepted, drafted): %v", sortedMap(got))
	assertNoProbesLeft(t)
}

func sortedMap(m map[string][]llamaStep) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s:%v", k, v))
	}
	sort.Strings(out)
	return out
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitHealthy polls the server's /health until it has loaded the models.
func waitHealthy(t *testing.T, base string, cmd *exec.Cmd) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if cmd.ProcessState != nil {
			t.Fatal("llama-server exited during start-up")
		}
		time.Sleep(100 * time.Millisecond) // polling readiness, not standing in for a sync
	}
	t.Fatal("llama-server not healthy within 60s")
}
