package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/probes"
)

// TestSpecReplay checks each catalog spec against its mirrors on every
// interpreter, without BPF: the target runs under replay_spec.py, which
// reads at each return of a stage function what the spec names (requests,
// when, accepted counts, drafted), as specprobe reads them. Per stage, the
// calls a spec keeps must serve exactly the requests of the target's own
// stage lines, in order, and every accept read must give exactly the counts
// of the log's accept lines, in order. A `when` must leave some calls out
// (prefill batches) except where the shape calls its stage for decode
// batches only. This checks the catalog's paths and conditions against the
// mirrors (the shapes of upstream's files) where hardware watchpoints do not
// fire; how the BPF reader takes the same values at the trap is checked by
// the traced tests (TestSGLangTarget, TestVLLMVariants, ...), which need
// watchpoints that fire.
func TestSpecReplay(t *testing.T) {
	root := repoRoot(t)
	sglang, vllm := filepath.Join(root, "pytargets", "run_sglang.py"), filepath.Join(root, "pytargets", "run_vllm.py")
	for _, c := range []struct {
		name, engine, script string
		args                 []string
		allKept              []string // stages whose `when` finds no call to leave out
	}{
		{"sglang/eagle_v2", "sglang", sglang, []string{"--worker", "eagle_v2"}, nil},
		{"sglang/pp-tail-draft", "sglang", sglang, []string{"--worker", "eagle_v2", "--pp-tail-draft"}, nil},
		{"sglang/dp-prefill-coordination", "sglang", sglang, []string{"--worker", "eagle_v2", "--dp-prefill-coordination"}, nil},
		{"sglang/standalone", "sglang-standalone", sglang, []string{"--worker", "standalone"}, nil},
		{"sglang/frozen_kv_mtp", "sglang-frozen-kv-mtp", sglang, []string{"--worker", "frozen_kv_mtp"}, nil},
		{"sglang/multi_layer_eagle", "sglang-multi-layer-eagle", sglang, []string{"--worker", "multi_layer_eagle"}, nil},
		{"sglang/ngram", "sglang-ngram", sglang, []string{"--worker", "ngram"}, nil},
		// The autumn-2026 NGRAMWorker never rewrites forward_mode, and
		// drafts only when called: the `when`s must key on the decode
		// batch, not on main's rewrite.
		{"sglang/ngram/autumn2026", "sglang-ngram", sglang, []string{"--worker", "ngram", "--shape", "autumn2026"}, []string{"draft"}},
		// The catalog survives the autumn-2026 renames (ModelWorkerBatch).
		{"sglang/eagle_v2/autumn2026", "sglang", sglang, []string{"--worker", "eagle_v2", "--shape", "autumn2026"}, nil},
		{"sglang/standalone/autumn2026", "sglang-standalone", sglang, []string{"--worker", "standalone", "--shape", "autumn2026"}, nil},
		{"sglang/frozen_kv_mtp/autumn2026", "sglang-frozen-kv-mtp", sglang, []string{"--worker", "frozen_kv_mtp", "--shape", "autumn2026"}, nil},
		{"sglang/multi_layer_eagle/autumn2026", "sglang-multi-layer-eagle", sglang, []string{"--worker", "multi_layer_eagle", "--shape", "autumn2026"}, nil},
		{"sglang/hybrid", "sglang-hybrid", sglang, []string{"--worker", "hybrid"}, nil},
		{"sglang/uno", "sglang-uno", sglang, []string{"--worker", "uno"}, nil},
		{"sglang/dflash", "sglang-dflash", sglang, []string{"--worker", "dflash"}, nil},
		{"sglang/dspark", "sglang-dspark", sglang, []string{"--worker", "dspark"}, nil},
		{"vllm/eagle", "vllm", vllm, nil, nil},
		{"vllm/mtp", "vllm-mtp", vllm, []string{"--speculator", "mtp"}, nil},
		{"vllm/ngram_mtp", "vllm-mtp", vllm, []string{"--speculator", "ngram_mtp"}, nil},
		{"vllm/ngram_gpu", "vllm-ngram", vllm, []string{"--speculator", "ngram_gpu"}, nil},
		{"vllm/standalone", "vllm-standalone", vllm, []string{"--speculator", "standalone"}, nil},
		{"vllm/dflash", "vllm-dflash", vllm, []string{"--speculator", "dflash"}, nil},
		{"vllm/dflash2", "vllm-dflash2", vllm, []string{"--speculator", "dflash2"}, nil},
		{"vllm/lilicorr", "vllm-lilicorr", vllm, []string{"--speculator", "lilicorr"}, nil},
		{"vllm/dspark", "vllm-dspark", vllm, []string{"--speculator", "dspark"}, nil},
		{"vllm/gemma4", "vllm-gemma4", vllm, []string{"--speculator", "gemma4"}, nil},
		{"vllm/multi_module_mtp", "vllm-multi-module-mtp", vllm, []string{"--speculator", "multi_module_mtp"}, nil},
		{"vllm/v1", "vllm-v1", vllm, []string{"--runner", "v1"}, nil},
		{"vllm/v1-sampled3", "vllm-v1", vllm, []string{"--runner", "v1", "--sampled-per-step", "3"}, nil},
		// No request objects: one request per generate() call.
		{"transformers-assisted", "transformers-assisted", filepath.Join(root, "pytargets", "run_transformers.py"), []string{"--max-new-tokens", "40"}, nil},
	} {
		spec, err := probes.Lookup(c.engine)
		if err != nil {
			t.Fatal(err)
		}
		stagesFile := filepath.Join(t.TempDir(), "stages.json")
		if err := os.WriteFile(stagesFile, replayStages(t, spec), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, py := range interpreters {
			t.Run(c.name+"/"+testinterp.Name(py), func(t *testing.T) {
				t.Parallel() // no BPF: runs beside the others only
				if _, err := os.Stat(py); err != nil {
					t.Skipf("interpreter %s not installed", py)
				}
				dir := t.TempDir()
				replay, truth := filepath.Join(dir, "replay.jsonl"), filepath.Join(dir, "truth.jsonl")
				args := []string{filepath.Join(root, "pytargets", "replay_spec.py"), replay, stagesFile, "--", c.script}
				args = append(append(args, c.args...), "--requests", "12", "--log", truth)
				if out, err := exec.Command(py, args...).CombinedOutput(); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				calls := readJSONL[replayCall](t, replay)
				var lines []pyTruth
				if spec.NamesRequests() {
					lines = readJSONL[pyTruth](t, truth)
				} else {
					lines = boundaryLines(t, spec, truth)
				}
				for _, name := range []string{probes.Draft, probes.Verify, probes.DraftExtend} {
					switch st := spec.Stages[name]; {
					case st == nil:
					case st.Requests != nil || !spec.NamesRequests():
						compareStage(t, name, st.When != nil && !slices.Contains(c.allKept, name), calls, lines)
					default: // its step's requests (same_batch): the calls are counted
						compareCount(t, name, calls, lines)
					}
				}
				if spec.Stages[probes.Accept] != nil {
					compareAccepts(t, calls, lines)
				}
			})
		}
	}
}

// boundaryLines is the log of a target whose stages name no requests
// (transformers' mirror: each line says which of its thread's generate()
// calls it is in) with each line's request named as specprobe names it.
func boundaryLines(t *testing.T, spec *probes.Spec, path string) []pyTruth {
	t.Helper()
	b := spec.Stages[probes.RequestBoundary]
	if b == nil {
		t.Fatalf("%s: no request boundary", spec.Engine)
	}
	var out []pyTruth
	for _, l := range readJSONL[transformersLine](t, path) {
		if l.Stage != "" {
			out = append(out, pyTruth{Stage: l.Stage, RIDs: []string{fmt.Sprintf("%s-%d-%d", b.Qualname, l.TID, l.Request)}})
		}
	}
	return out
}

// replayStages is the spec's Python stages (and request boundary) as
// replay_spec.py takes them.
func replayStages(t *testing.T, spec *probes.Spec) []byte {
	t.Helper()
	var out []map[string]any
	for _, name := range []string{probes.Draft, probes.Verify, probes.DraftExtend, probes.Accept} {
		st := spec.Stages[name]
		if st == nil {
			continue
		}
		if !st.IsPython() {
			t.Fatalf("%s %s: not a Python stage", spec.Engine, name)
		}
		m := map[string]any{"name": name, "module": st.Module, "qualname": st.Qualname}
		if r := st.Requests; r != nil {
			m["requests"] = map[string]any{"arg": replayArg(r.Arg, r.ArgChoice), "path": r.Path, "id": r.ID}
		}
		if w := st.When; w != nil {
			m["when"] = map[string]any{"arg": replayArg(w.Arg, w.ArgChoice), "path": w.Path, "equals": w.Equals}
		}
		if st.ReadFrom != "" {
			m["read_from"] = st.ReadFrom
		}
		if a := st.Accepted; a != nil {
			acc := replayList(a)
			acc["len"], acc["add"] = a.Len, a.Add
			if a.Sub != nil {
				acc["sub"] = replayList(a.Sub)
			}
			m["accepted"] = acc
		}
		if d := st.Drafted; d != nil {
			m["drafted"] = replayList(d)
		}
		out = append(out, m)
	}
	conf := map[string]any{"stages": out}
	if b := spec.Stages[probes.RequestBoundary]; b != nil {
		conf["boundary"] = map[string]any{"module": b.Module, "qualname": b.Qualname}
	}
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func replayList(l *probes.PyList) map[string]any {
	return map[string]any{"arg": replayArg(l.Arg, l.ArgChoice), "path": l.Path}
}

// replayArg is an argument as replay_spec.py takes it: a name, a list of
// names or a position.
func replayArg(arg string, c *probes.ArgChoice) any {
	switch {
	case c == nil:
		return arg
	case len(c.Names) > 0:
		return c.Names
	}
	return c.Position
}

// compareStage: the calls of a stage the spec keeps, each serving at least
// one request, are the log's stage lines of that stage (prefill lines and
// lines serving none aside), the same requests in order; no read failed.
func compareStage(t *testing.T, name string, wantLeftOut bool, calls []replayCall, lines []pyTruth) {
	t.Helper()
	var kept, want [][]string
	left, failed := 0, 0
	for _, c := range calls {
		switch {
		case c.Stage != name:
		case c.Error != "":
			if failed++; failed == 1 {
				t.Errorf("%s: read failed: %s", name, c.Error)
			}
		case !c.Kept:
			left++
		case len(c.RIDs) > 0:
			kept = append(kept, c.RIDs)
		}
	}
	for _, l := range lines {
		if l.Stage == name && l.Mode != "prefill" && len(l.RIDs) > 0 {
			want = append(want, l.RIDs)
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(kept, want) {
		t.Errorf("%s: %d calls kept, the log has %d stage lines (the same requests in order: %v)%s", name, len(kept), len(want), reflect.DeepEqual(kept, want), firstDiff(kept, want))
	}
	if wantLeftOut && left == 0 {
		t.Errorf("%s: no call left out by when (prefill batches should be)", name)
	}
	t.Logf("%s: %d calls kept = %d log lines, %d left out by when", name, len(kept), len(want), left)
}

// compareCount: a stage that reads no requests of its own (they are its
// step's) is called as often as the log has its lines, prefill aside.
func compareCount(t *testing.T, name string, calls []replayCall, lines []pyTruth) {
	t.Helper()
	got, want := 0, 0
	for _, c := range calls {
		if c.Stage == name {
			got++
		}
	}
	for _, l := range lines {
		if l.Stage == name && l.Mode != "prefill" {
			want++
		}
	}
	if want == 0 || got != want {
		t.Errorf("%s: %d calls, the log has %d stage lines", name, got, want)
	}
	t.Logf("%s: %d calls = %d log lines", name, got, want)
}

// compareAccepts: the accept reads that counted something are the log's
// accept lines, in order, each request with the count the log says.
func compareAccepts(t *testing.T, calls []replayCall, lines []pyTruth) {
	t.Helper()
	var got, want []map[string]int64
	failed := 0
	for _, c := range calls {
		switch {
		case c.Stage != probes.Accept:
		case c.Error != "":
			if failed++; failed == 1 {
				t.Errorf("accept: read failed: %s", c.Error)
			}
		case len(c.Counts) > 0:
			got = append(got, c.Counts)
		}
	}
	for _, l := range lines {
		if l.Stage == probes.Accept && len(l.RIDs) > 0 {
			m := map[string]int64{}
			for i, rid := range l.RIDs {
				m[rid] = l.Correct[i]
			}
			want = append(want, m)
		}
	}
	if len(want) == 0 || !slices.EqualFunc(got, want, maps.Equal) {
		t.Errorf("accept: %d reads with counts, the log has %d accept lines (equal: %v)%s", len(got), len(want), slices.EqualFunc(got, want, maps.Equal), firstDiff(got, want))
	}
	t.Logf("accept: %d reads = %d log lines", len(got), len(want))
}

// firstDiff says where two sequences first differ, for the error message.
func firstDiff[T any](got, want []T) string {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return "; first missing: " + fmt.Sprint(want[i])
		case i >= len(want):
			return "; first extra: " + fmt.Sprint(got[i])
		case !reflect.DeepEqual(got[i], want[i]):
			return "; first difference at " + strconv.Itoa(i) + ": got " + fmt.Sprint(got[i]) + ", want " + fmt.Sprint(want[i])
		}
	}
	return ""
}

// replayCall is a line of replay_spec.py's log.
type replayCall struct {
	Stage  string           `json:"stage"`
	RIDs   []string         `json:"rids"`
	Kept   bool             `json:"kept"`
	Counts map[string]int64 `json:"counts"`
	Error  string           `json:"error"`
}
