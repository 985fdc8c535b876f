package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanschema"
	"github.com/specprobe/specprobe/tracer"
)

// Issue 22: the time each stage blocked on the GPU and what it launched,
// measured at the CUDA driver. The driver here is a stand-in
// (testdata/fakecuda.c, built as libcuda.so.1): a launch queues work and
// returns at once, a sync sleeps until the queued work is done. The
// targets log, per stage call, the launches they made and how long each
// sync blocked by their own clock; the spans must match that log.

const cudaEngineSpec = `engine: cudaengine
stages:
  draft:
    binary: cudaengine
    symbol: engine_draft
    scope: request
    request_id: {at: entry, from: arg0, type: string}
  verify:
    binary: cudaengine
    symbol: engine_verify
    scope: request
    request_id: {at: entry, from: arg0, type: string}
  draft_extend:
    binary: cudaengine
    symbol: engine_draft_extend
    scope: request
    request_id: {at: entry, from: arg0, type: string}
`

// buildFakeCUDA builds the stand-in driver as dir/libcuda.so.1 and, when
// engine, the native engine linked against it.
func buildFakeCUDA(t *testing.T, engine bool) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(repoRoot(t), "integration", "testdata")
	lib := filepath.Join(dir, "libcuda.so.1")
	cmds := [][]string{{"gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-fcf-protection=none", "-fPIC", "-shared", "-o", lib, filepath.Join(src, "fakecuda.c")}}
	if engine {
		cmds = append(cmds, []string{"gcc", "-O2", "-g", "-o", filepath.Join(dir, "cudaengine"), filepath.Join(src, "cudaengine.c"), lib, "-Wl,-rpath,$ORIGIN"})
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return dir
}

// cudaTruth is one line of a target's log: a stage call, or ("outside") what
// a step did outside its stages.
type cudaTruth struct {
	Stage    string `json:"stage"`
	RID      string `json:"rid"`
	Launches int64  `json:"launches"`
	Graphs   int64  `json:"graphs"`
	Syncs    int64  `json:"syncs"`
	SyncNs   int64  `json:"sync_ns"`
}

func readCUDATruth(t *testing.T, path string) []cudaTruth { return readJSONL[cudaTruth](t, path) }

// cudaSpanUse is what a span says its thread did in the driver.
type cudaSpanUse struct {
	rid                     string
	start                   time.Time
	launches, graphs, syncs int64
	syncNs                  int64
	present                 bool
}

func cudaUseOf(s sdktrace.ReadOnlySpan) cudaSpanUse {
	a := attrs(s)
	d, ok := a[spanschema.KeyCUDASyncDuration]
	return cudaSpanUse{rid: a["rid"].AsString(), start: s.StartTime(), present: ok,
		launches: a[spanschema.KeyCUDALaunches].AsInt64(), graphs: a[spanschema.KeyCUDAGraphs].AsInt64(),
		syncs: a[spanschema.KeyCUDASyncCount].AsInt64(), syncNs: int64(d.AsFloat64()*1e9 + 0.5)}
}

// compareCUDA matches each log line with its span, the n-th line of a
// request and stage with the n-th span (by start), and checks the counts
// exactly and the blocked time against the target's clock. The probes time
// a sync from inside its entry to inside its return, an interval nested in
// the one the target timed around the call: the span's time is never
// longer (1 µs for rounding to seconds as a double and back), and shorter
// by the two probe hits, a few µs; a preemption in between can add up to a
// scheduling slice on a busy machine, so one call may be 2 ms short, and
// the median shortfall must stay under 100 µs. Both bounds scale with the
// machine (machineTime): under a guest's emulated CPU each probe hit takes
// tens of µs, and the median came to 116 µs in one run of the 6.1 guest.
func compareCUDA(t *testing.T, truth []cudaTruth, spans []sdktrace.ReadOnlySpan, spanName map[string]string) {
	t.Helper()
	got := map[string][]cudaSpanUse{} // stage/rid -> spans by start
	for _, s := range spans {
		for stage, name := range spanName {
			if s.Name() == name {
				u := cudaUseOf(s)
				got[stage+"/"+u.rid] = append(got[stage+"/"+u.rid], u)
			}
		}
	}
	for _, l := range got {
		slices.SortFunc(l, func(a, b cudaSpanUse) int { return a.start.Compare(b.start) })
	}
	seen := map[string]int{}
	var short []int64
	for _, c := range truth {
		key := c.Stage + "/" + c.RID
		i := seen[key]
		seen[key]++
		if i >= len(got[key]) {
			t.Errorf("%s call %d of %s: no span", c.Stage, i, c.RID)
			continue
		}
		u := got[key][i]
		if !u.present {
			t.Errorf("%s call %d of %s: no specprobe.cuda.* attributes", c.Stage, i, c.RID)
			continue
		}
		if u.launches != c.Launches || u.graphs != c.Graphs || u.syncs != c.Syncs {
			t.Errorf("%s call %d of %s: span launches %d graphs %d syncs %d, the target made %d, %d, %d",
				c.Stage, i, c.RID, u.launches, u.graphs, u.syncs, c.Launches, c.Graphs, c.Syncs)
		}
		diff := c.SyncNs - u.syncNs
		// The target's own timing holds its Python (ctypes) around the sync.
		if diff < -1000 || diff > int64(machineTime(2*time.Millisecond)) {
			t.Errorf("%s call %d of %s: span blocked %dns, the target timed %dns", c.Stage, i, c.RID, u.syncNs, c.SyncNs)
		}
		if c.Syncs > 0 {
			short = append(short, diff)
		}
	}
	for key, l := range got {
		if seen[key] != len(l) {
			t.Errorf("%s: %d spans, the target logged %d calls", key, len(l), seen[key])
		}
	}
	if len(short) == 0 {
		t.Fatal("no sync in the log")
	}
	slices.Sort(short)
	med := short[len(short)/2]
	t.Logf("%d syncs: the span's time short of the target's by median %dns, max %dns", len(short), med, short[len(short)-1])
	if med > int64(machineTime(100*time.Microsecond)) {
		t.Errorf("the spans' sync time is short of the target's by a median %dns", med)
	}
}

// TestCUDANativeEngine: a native engine's stages call the stand-in driver.
// The verify span carries the time it blocked, the draft none, every stage
// its launch and graph counts exactly, and each decode_loop what the step
// did between its stages.
func TestCUDANativeEngine(t *testing.T) {
	needRoot(t)
	dir := buildFakeCUDA(t, true)
	spec, err := probes.Parse("cudaengine.yaml", []byte(cudaEngineSpec))
	if err != nil {
		t.Fatal(err)
	}
	const steps = 120
	logPath := filepath.Join(dir, "truth.jsonl")
	res, spans, log := runParked(t, spec, []string{"FAKECUDA_KERNEL_US=150", "FAKECUDA_GRAPH_US=400"},
		filepath.Join(dir, "cudaengine"), logPath, fmt.Sprint(steps))
	truth := readCUDATruth(t, logPath)
	if len(truth) != 4*steps {
		t.Fatalf("the engine logged %d lines, want %d", len(truth), 4*steps)
	}
	if !strings.Contains(log, "CUDA driver "+filepath.Join(dir, "libcuda.so.1")) {
		t.Errorf("attach did not report the CUDA probes:\n%s", log)
	}
	compareCUDA(t, truth, spans, map[string]string{"draft": "spec_draft", "verify": "spec_verify",
		"draft_extend": "spec_draft_extend", "outside": spanschema.DecodeLoop})
	var draft, verify time.Duration
	for _, c := range truth {
		if c.Stage == "draft" && c.SyncNs != 0 {
			t.Errorf("the engine's draft blocked %dns", c.SyncNs)
		}
		if c.Stage == "verify" {
			verify += time.Duration(c.SyncNs)
		}
	}
	if u := res.Stats.CUDA["draft"]; !u.Known || u.Sync != draft || u.Syncs != 0 {
		t.Errorf("summary: draft %+v, want no sync", u)
	}
	if u := res.Stats.CUDA["verify"]; !u.Known || u.Syncs != steps || u.Sync > verify || u.Sync < verify*9/10 {
		t.Errorf("summary: verify %+v, the engine blocked %s in %d syncs", u, verify, steps)
	}
}

// TestCUDAPythonStage: the same for a Python stage (a watchpoint's
// records carry the counters): each call's launches, graph and sync.
func TestCUDAPythonStage(t *testing.T) {
	needWatchpoints(t)
	py := testinterp.Py312
	if _, err := os.Stat(py); err != nil {
		t.Skipf("interpreter %s not installed", py)
	}
	dir := buildFakeCUDA(t, false)
	const calls = 60
	logPath := filepath.Join(dir, "truth.jsonl")
	spec := mainStageSpec(t, `{arg: req, id: rid}`)
	_, spans, _ := runParked(t, spec, []string{"FAKECUDA_KERNEL_US=200", "FAKECUDA_GRAPH_US=300"},
		py, filepath.Join(repoRoot(t), "integration", "testdata", "cudastage.py"), filepath.Join(dir, "libcuda.so.1"), logPath, fmt.Sprint(calls))
	truth := readCUDATruth(t, logPath)
	if len(truth) != calls {
		t.Fatalf("the script logged %d calls, want %d", len(truth), calls)
	}
	compareCUDA(t, truth, spans, map[string]string{"verify": "spec_verify"})
}

// TestCUDANotMapped: a process without libcuda gets no CUDA attributes and
// one line saying so; --no-cuda says nothing.
func TestCUDANotMapped(t *testing.T) {
	needRoot(t)
	d := startDemo(t, demoBinary(t, "specdemo"), "--requests", "4")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var log strings.Builder
	_, spans := traceRun(t, ctx, tracer.Config{PID: d.cmd.Process.Pid, Spec: demoSpec(t), Log: &log}, func() { d.release(t) })
	want := fmt.Sprintf("CUDA: libcuda.so.1 not mapped by PID %d: no GPU wait/launch fields", d.cmd.Process.Pid)
	if n := strings.Count(log.String(), want); n != 1 {
		t.Errorf("%d lines %q in:\n%s", n, want, log.String())
	}
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	for _, s := range spans {
		if _, ok := attrs(s)[spanschema.KeyCUDALaunches]; ok {
			t.Fatalf("%s carries CUDA attributes without CUDA probes", s.Name())
		}
	}
}
