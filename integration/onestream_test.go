package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

// Issue 20, item 4: an engine whose stages name no request
// (testdata/onestream.c, a native one-stream loop) is traced as one request
// per thread's stream of steps, or per call of the request boundary the
// spec names; the spans must equal the target's log exactly.

const oneStreamSpec = `engine: onestream
stages:
  draft:
    binary: onestream
    symbol: stream_draft
    scope: batch
    values:
      num_drafts: {at: entry, from: arg1, type: int, size: 4}
  verify:
    binary: onestream
    symbol: stream_verify
    scope: batch
    values:
      num_correct_drafts: {at: exit, from: ret, type: int, size: 4}
`

const oneStreamBoundary = `request_boundary:
  binary: onestream
  symbol: run_request
`

// oneStreamLine is one stage call the target logged.
type oneStreamLine struct {
	Stage     string `json:"stage"`
	TID       uint32 `json:"tid"`
	StartNs   int64  `json:"start_ns"`
	EndNs     int64  `json:"end_ns"`
	Request   int    `json:"request"`
	NumDrafts int64  `json:"num_drafts"`
	Correct   *int64 `json:"num_correct_drafts"`
}

func TestOneStream(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "onestream")
	src := filepath.Join(repoRoot(t), "integration", "testdata", "onestream.c")
	if out, err := exec.Command("gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-fcf-protection=none", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", src, err, out)
	}
	const threads, requests, steps = 2, 3, 6
	cases := []struct {
		name     string
		boundary bool
		gapMs    int
		rounds   int // of threads, one after another: threads exit while the target runs
		idle     time.Duration
		// rid is the request a call of the thread's request-th request
		// serves, as docs/probe-spec.md says.
		rid func(tid uint32, request int) string
	}{
		{"boundary", true, 0, 1, 0, func(tid uint32, r int) string { return fmt.Sprintf("run_request-%d-%d", tid, r) }},
		{"stream", false, 0, 1, 0, func(tid uint32, r int) string { return fmt.Sprintf("thread-%d-1", tid) }},
		{"stream with idle gaps", false, 600, 1, 250 * time.Millisecond, func(tid uint32, r int) string { return fmt.Sprintf("thread-%d-%d", tid, r) }},
		{"threads that come and go", false, 300, 5, 0, // over a sweepEvery: dead threads are swept while it runs
			func(tid uint32, r int) string { return fmt.Sprintf("thread-%d-1", tid) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := oneStreamSpec
			if c.boundary {
				text += oneStreamBoundary
			}
			spec, err := probes.Parse("onestream.yaml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(t.TempDir(), "truth.jsonl")
			res, spans, _ := runParkedWith(t, tracer.Config{Spec: spec, SkipEndbr: true, RequestIdle: c.idle}, nil,
				bin, logPath, fmt.Sprint(threads), fmt.Sprint(requests), fmt.Sprint(steps), fmt.Sprint(c.gapMs), fmt.Sprint(c.rounds))
			if !res.TargetExited {
				t.Errorf("session ended with %q, want the target's exit", res.Reason)
			}
			if res.Drops != 0 || res.Stats.UnmatchedExits != 0 || res.Stats.UnattributedSteps != 0 || res.Stats.CutExitMissed != 0 {
				t.Errorf("drops %d, unmatched exits %d, steps without a request %d, cut %d; want none",
					res.Drops, res.Stats.UnmatchedExits, res.Stats.UnattributedSteps, res.Stats.CutExitMissed)
			}
			lines := readJSONL[oneStreamLine](t, logPath)
			if n := c.rounds * threads * requests * steps * 2; len(lines) != n {
				t.Fatalf("the target logged %d calls, want %d", len(lines), n)
			}
			want := map[string][]expectedCall{}
			for _, l := range lines {
				w := expectedCall{stage: l.Stage, tid: l.TID, start: l.StartNs, end: l.EndNs, correct: l.Correct}
				if l.Stage == "draft" {
					w.numDrafts = &l.NumDrafts
				}
				rid := c.rid(l.TID, l.Request)
				want[rid] = append(want[rid], w)
			}
			compareExpected(t, spans, want)
		})
	}
}

// transformersLine is one draft or verify the transformers mirror logged.
type transformersLine struct {
	Stage   string `json:"stage"`
	TID     uint32 `json:"tid"`
	StartNs int64  `json:"start_ns"`
	EndNs   int64  `json:"end_ns"`
	Request int    `json:"request"`
}

// TestOneStreamTransformers: transformers' assisted generation, as its
// mirror (pytargets/transformers/) runs it, traced with the catalog spec:
// one request per generate() call, each draft and each verify of the
// target's forward once (the assistant's forward, of the same class, runs
// inside the draft and is none), no counts (they are GPU tensors upstream).
func TestOneStreamTransformers(t *testing.T) {
	needWatchpoints(t)
	spec, err := probes.Lookup("transformers-assisted")
	if err != nil {
		t.Fatal(err)
	}
	for _, py := range interpreters {
		if _, err := os.Stat(py); err != nil {
			t.Logf("interpreter %s not installed: left out", py)
			continue
		}
		t.Run(testinterp.Name(py), func(t *testing.T) {
			const requests = 12
			logPath := filepath.Join(t.TempDir(), "truth.jsonl")
			res, spans, _ := runParkedWith(t, tracer.Config{Spec: spec}, nil, py,
				filepath.Join(repoRoot(t), "pytargets", "run_transformers.py"), "--wait-signal", "--log", logPath,
				"--requests", fmt.Sprint(requests), "--max-new-tokens", "40")
			if res.Stats.UnattributedSteps != 0 || res.Stats.UnmatchedExits != 0 || res.Stats.CutExitMissed != 0 {
				t.Errorf("steps without a request %d, unmatched exits %d, cut %d; want none",
					res.Stats.UnattributedSteps, res.Stats.UnmatchedExits, res.Stats.CutExitMissed)
			}
			want := map[string][]expectedCall{}
			calls := 0
			for _, l := range readJSONL[transformersLine](t, logPath) {
				if l.Stage == "" {
					continue // an event line
				}
				rid := fmt.Sprintf("GenerationMixin.generate-%d-%d", l.TID, l.Request)
				want[rid] = append(want[rid], expectedCall{stage: l.Stage, tid: l.TID, start: l.StartNs, end: l.EndNs})
				calls++
			}
			if len(want) != requests || calls == 0 {
				t.Fatalf("the mirror logged %d calls of %d requests, want %d requests", calls, len(want), requests)
			}
			compareExpected(t, spans, want)
		})
	}
}
