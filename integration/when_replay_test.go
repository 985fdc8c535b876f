package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/probes"
)

// TestWhenReplay checks the `when`s of the SGLang specs that have them
// against their mirrors on every interpreter, without BPF: the target runs
// under replay_when.py, which reads each `when` and the requests as a stage
// call returns (as specprobe reads them) and logs which calls it keeps. The
// kept calls must be exactly the target's ground-truth stage lines, in order,
// and some calls (prefill batches) must be left out. sglang-ngram against
// main's NGRAMWorker (no HYBRID hooks) and the autumn-2026 one (which never
// rewrites forward_mode), sglang-hybrid against the #37237 branch's controller. This holds where hardware watchpoints do not fire;
// TestSGLangWorkers traces the same with them.
func TestWhenReplay(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct {
		engine, worker, shape string
		allKept               []string // stages called for decode batches only: none to leave out
	}{
		{"sglang-ngram", "ngram", "today", nil},
		// The autumn-2026 NGRAMWorker never rewrites forward_mode, and
		// drafts only when called: the `when`s must key on the decode
		// batch, not on main's rewrite.
		{"sglang-ngram", "ngram", "autumn2026", []string{"draft"}},
		{"sglang-hybrid", "hybrid", "today", nil},
		{"sglang-dflash", "dflash", "today", nil},
	} {
		spec, err := probes.Lookup(c.engine)
		if err != nil {
			t.Fatal(err)
		}
		stages, stageArgs := whenStages(t, spec)
		for _, py := range interpreters {
			t.Run(c.worker+"/"+c.shape+"/"+strings.TrimPrefix(py, "/root/.pyenv/versions/"), func(t *testing.T) {
				if _, err := os.Stat(py); err != nil {
					t.Skipf("interpreter %s not installed", py)
				}
				dir := t.TempDir()
				replay, truth := filepath.Join(dir, "replay.jsonl"), filepath.Join(dir, "truth.jsonl")
				args := append([]string{filepath.Join(root, "pytargets", "replay_when.py"), replay}, stageArgs...)
				args = append(args, "--", filepath.Join(root, "pytargets", "run_sglang.py"),
					"--worker", c.worker, "--shape", c.shape, "--requests", "12", "--log", truth)
				if out, err := exec.Command(py, args...).CombinedOutput(); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				compareKept(t, stages, c.allKept, readJSONLines[replayCall](t, replay), readJSONLines[replayCall](t, truth))
			})
		}
	}
}

// whenStages lists a spec's stages that have a `when`, and each as
// replay_when.py takes it (STAGE=MODULE:QUALNAME:ARG:PATH:EQUALS).
func whenStages(t *testing.T, spec *probes.Spec) (names, args []string) {
	t.Helper()
	for _, name := range []string{"draft", "verify", "draft_extend"} {
		st := spec.Stages[name]
		if st == nil || st.When == nil {
			continue
		}
		if st.Requests == nil || st.Requests.Path != "reqs[*]" || st.Requests.ID != "rid" {
			t.Fatalf("%s %s: replay_when.py reads requests at reqs[*].rid only", spec.Engine, name)
		}
		names = append(names, name)
		args = append(args, name+"="+strings.Join([]string{st.Module, st.Qualname,
			whenArg(st.When), st.When.Path, strings.Join(st.When.Equals, "|")}, ":"))
	}
	if len(names) == 0 {
		t.Fatalf("%s has no stage with a when", spec.Engine)
	}
	return names, args
}

// compareKept: per stage, the calls a `when` kept are the log's stage lines
// (the same requests, in order), and some calls were left out, except in
// the stages of allKept.
func compareKept(t *testing.T, stages, allKept []string, calls, lines []replayCall) {
	t.Helper()
	for _, name := range stages {
		var kept, want [][]string
		left := 0
		for _, c := range calls {
			switch {
			case c.Stage != name:
			case c.Kept:
				kept = append(kept, c.RIDs)
			default:
				left++
			}
		}
		for _, l := range lines {
			if l.Stage == name {
				want = append(want, l.RIDs)
			}
		}
		if len(want) == 0 || !reflect.DeepEqual(kept, want) {
			t.Errorf("%s: when keeps %d calls, the log has %d stage lines (the same requests in order: %v)", name, len(kept), len(want), reflect.DeepEqual(kept, want))
		}
		if left == 0 && !slices.Contains(allKept, name) {
			t.Errorf("%s: no call left out by when (prefill batches should be)", name)
		}
		t.Logf("%s: %d calls kept = %d log lines, %d left out by when", name, len(kept), len(want), left)
	}
}

// whenArg is a when's argument as replay_when.py takes it: the names to try,
// separated by "|".
func whenArg(c *probes.PyCond) string {
	if c.ArgChoice != nil {
		return strings.Join(c.ArgChoice.Names, "|")
	}
	return c.Arg
}

// replayCall is a line of replay_when.py's log, or (Stage, RIDs) of a
// ground-truth line.
type replayCall struct {
	Stage string   `json:"stage"`
	RIDs  []string `json:"rids"`
	Kept  bool     `json:"kept"`
}

// readJSONLines reads a JSON-lines file, one T a line.
func readJSONLines[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		out = append(out, v)
	}
	return out
}
