package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/export/otlptest"
	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanschema"
	"github.com/specprobe/specprobe/tracer"
)

// stageSpan is an exported stage span, as checkServed needs it.
type stageSpan struct {
	stage, rid string
	tid        uint32
	start, end int64
	cut        string
	failed     bool
}

func sdkStageSpans(spans []sdktrace.ReadOnlySpan) []stageSpan {
	var out []stageSpan
	for _, s := range spans {
		st, ok := spanschema.StageOf(s.Name())
		if !ok {
			continue
		}
		a := attrs(s)
		out = append(out, stageSpan{stage: st, rid: a[spanschema.KeyRID].AsString(), tid: uint32(a[spanschema.KeyThreadID].AsInt64()),
			start: s.StartTime().UnixNano(), end: s.EndTime().UnixNano(), cut: a[spanschema.KeyCut].AsString(),
			failed: s.Status().Code == codes.Error})
	}
	return out
}

// fileStageSpans reads the stage spans of an otlp-file.
func fileStageSpans(t *testing.T, path string) []stageSpan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []stageSpan
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<20), 64<<20)
	for sc.Scan() {
		req, err := export.UnmarshalOTLPJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("otlp-file line: %v", err)
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					st, ok := spanschema.StageOf(s.GetName())
					if !ok {
						continue
					}
					kv := s.GetAttributes()
					rid, _ := otlptest.Lookup(kv, string(spanschema.KeyRID)).(string)
					tid, _ := otlptest.Lookup(kv, string(spanschema.KeyThreadID)).(int64)
					cut, _ := otlptest.Lookup(kv, string(spanschema.KeyCut)).(string)
					out = append(out, stageSpan{stage: st, rid: rid, tid: uint32(tid), start: int64(s.GetStartTimeUnixNano()),
						end: int64(s.GetEndTimeUnixNano()), cut: cut, failed: s.GetStatus().GetCode() == 2})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkServed checks every stage span against the target's log: each names
// a request its call served (a call of that stage on that thread, begun
// when the span began), no (call, request) twice, and a span closed by its
// exit lies inside the call's own times. A span cut or ended by the
// detach has no exit: its end is only where specprobe stopped waiting. It
// returns how many spans were cut.
func checkServed(t *testing.T, what string, spans []stageSpan, truth []truthCall) (cut int) {
	t.Helper()
	type key struct {
		tid   uint32
		stage string
	}
	byKey := map[key][]int{}
	for i, c := range truth {
		byKey[key{c.TID, c.Stage}] = append(byKey[key{c.TID, c.Stage}], i)
	}
	type served struct {
		call int
		rid  string
	}
	seen := map[served]bool{}
	bad := 0
	slack := int64(clockSlack)
	for _, s := range spans {
		if s.cut != "" {
			cut++
		}
		call := -1
		for _, i := range byKey[key{s.tid, s.stage}] {
			c := truth[i]
			if s.start >= c.StartNs-slack && s.start <= c.EndNs+slack && contains(c.RIDs, s.rid) {
				call = i
				break
			}
		}
		msg := ""
		switch {
		case call < 0:
			msg = "no call of the stage on the thread served the request then"
		case seen[served{call, s.rid}]:
			msg = "a second span for the same call and request"
		case !s.failed && s.end > truth[call].EndNs+slack:
			msg = fmt.Sprintf("ends at %s, after the call (%s)", fmtNs(s.end), fmtNs(truth[call].EndNs))
		}
		if call >= 0 {
			seen[served{call, s.rid}] = true
		}
		if msg != "" {
			if bad < 10 {
				t.Errorf("%s: spec_%s of %s on thread %d at %s (cut %q): %s", what, s.stage, s.rid, s.tid, fmtNs(s.start), s.cut, msg)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d stage spans do not match the target's log", what, bad, len(spans))
	}
	return cut
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// serving is a busy target the cut tests trace: started parked, set going
// by release, stopped cleanly by stop, its calls read back from its log.
type serving struct {
	pid     int
	spec    *probes.Spec
	release func()
	stop    func()
	truth   func() []truthCall
	args    []string // attach's flags for it
	// busy: some call is open on some thread at every moment (the demo's 8
	// threads), so lost events always cut one; a single-threaded Python
	// target can lose whole calls between two of its steps.
	busy bool
}

// demoServing is the native demo with threads busy threads.
func demoServing(t *testing.T, threads int) *serving {
	needRoot(t)
	d := startDemo(t, demoBinary(t, "specdemo-cet"), "--threads", itoa(threads), "--requests", "1000000")
	return &serving{
		pid: d.cmd.Process.Pid, spec: demoSpec(t), release: func() { d.release(t) },
		stop: func() {
			if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			waitExit(t, d, 0)
		},
		truth: func() []truthCall { return readTruth(t, d.log) },
		busy:  true,
	}
}

// sglangServing is the SGLang mirror at batch 64 (requests that last
// thousands of steps, so it is busy for as long as a test needs) on
// pyenv's 3.12.
func sglangServing(t *testing.T) *serving {
	spec, script := pyTarget(t, "sglang", "run_sglang.py")
	cmd, log := startPyTarget(t, script, testinterp.Py312, "--requests", "2000", "--max-batch", "64",
		"--max-new-tokens", "20000", "--work-scale", "0.05", "--noise-calls", "200")
	return &serving{
		pid: cmd.Process.Pid, spec: spec, release: func() { _ = cmd.Process.Signal(syscall.SIGUSR1) },
		stop: func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if code := exitCode(t, cmd); code != 0 {
				t.Fatalf("the SGLang target exited with %d", code)
			}
		},
		truth: func() []truthCall { return pyServed(t, log) },
		// A ring small enough that the guests' slower target fills it in
		// the stop too.
		args: []string{"--engine", "sglang", "--ring-buffer", "256KiB"},
	}
}

// pyServed is a pytargets log's stage calls (accept lines and prefill draft
// extends aside: the spec traces neither as a stage span), as checkServed
// reads them.
func pyServed(t *testing.T, log string) []truthCall {
	var out []truthCall
	for _, l := range readJSONL[pyTruth](t, log) {
		if l.Stage == "" || l.Stage == spanschema.Accept || l.Mode == "prefill" {
			continue
		}
		out = append(out, truthCall{Stage: l.Stage, TID: l.TID, StartNs: l.StartNs, EndNs: l.EndNs, RIDs: l.RIDs})
	}
	return out
}

// TestAttachWhileServing attaches to a busy target again and again, for 700
// ms each: a call in progress at attach or detach must never make a step
// swallow others, so every stage span names a request its call served, no
// call is cut by a missed exit it did not have, and each session detaches
// within its flush timeout. The native demo 20 times, the SGLang mirror at
// batch 64 50 times.
func TestAttachWhileServing(t *testing.T) {
	t.Run("native", func(t *testing.T) { attachWhileServing(t, demoServing(t, 4), 20) })
	t.Run("sglang/3.12", func(t *testing.T) { attachWhileServing(t, sglangServing(t), 50) })
}

func attachWhileServing(t *testing.T, s *serving, attaches int) {
	var all [][]stageSpan
	var unmatched, cutMissed, cutDropped, drops uint64
	const each = 700 * time.Millisecond
	for i := 0; i < attaches; i++ {
		release := func() {}
		if i == 0 {
			release = s.release
		}
		ctx, cancel := context.WithTimeout(context.Background(), machineTime(30*time.Second))
		began := time.Now()
		res, spans := traceRun(t, ctx, tracer.Config{PID: s.pid, Spec: s.spec, SkipEndbr: true, Duration: each}, release)
		took := time.Since(began)
		cancel()
		if res.TargetExited {
			t.Fatalf("attach %d: the target exited", i)
		}
		// Attaching (loading and arming) takes part of a second; the rest
		// is the duration, then at most the flush timeout.
		if limit := each + tracer.DefaultFlushTimeout + machineTime(2*time.Second); took > limit {
			t.Errorf("attach %d took %s, want under %s", i, took.Round(time.Millisecond), limit)
		}
		all = append(all, sdkStageSpans(spans))
		unmatched += res.Stats.UnmatchedExits
		cutMissed += res.Stats.CutExitMissed
		cutDropped += res.Stats.CutDropped
		drops += res.Drops
	}
	assertNoProbesLeft(t)
	s.stop()
	truth := s.truth()
	n := 0
	for i, spans := range all {
		checkServed(t, fmt.Sprintf("attach %d (detach)", i), spans, truth)
		n += len(spans)
	}
	t.Logf("%d attaches: %d stage spans, %d exits without entry, %d calls cut by a missed exit, %d by drops",
		attaches, n, unmatched, cutMissed, cutDropped)
	if n == 0 {
		t.Fatal("no stage span in any attach")
	}
	// Exit probes are armed first (natively; a Python call's pop and push
	// are the same watchpoint): a call begun while the probes are being
	// armed shows an exit without an entry, never an entry whose exit
	// does not come. Without kernel drops, nothing is cut.
	if drops == 0 && cutMissed+cutDropped != 0 {
		t.Errorf("%d calls cut without any kernel drop: an entry was seen whose exit was not", cutMissed+cutDropped)
	}
}

// TestStoppedTracerDrops stops specprobe (SIGSTOP) while a busy target fills
// its ring buffer: the kernel drops events, the calls they leave without an
// exit are cut and counted per thread, every span still names a request its
// call served, every call logged from a second after SIGCONT has its spans,
// and the output stays within what the log explains. The native demo with 8
// threads stopped 4 s; the SGLang mirror at batch 64 stopped 15 s.
func TestStoppedTracerDrops(t *testing.T) {
	t.Run("native", func(t *testing.T) { stoppedTracerDrops(t, demoServing(t, 8), 4*time.Second) })
	t.Run("sglang/3.12", func(t *testing.T) { stoppedTracerDrops(t, sglangServing(t), 15*time.Second) })
}

func stoppedTracerDrops(t *testing.T, s *serving, stop time.Duration) {
	out := filepath.Join(t.TempDir(), "spans.jsonl")
	cmd := exec.Command(specprobeBinary(t), append([]string{"attach", "--pid", itoa(s.pid), "--quiet", "--exporter", "otlp-file=" + out}, s.args...)...)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(machineTime(30 * time.Second))
	for !strings.Contains(log.String(), "attached to PID") {
		if time.Now().After(deadline) {
			t.Fatalf("specprobe did not attach:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the output, not standing in for a sync
	}
	s.release()
	// The scenario's own timing: trace a while, stop specprobe long enough
	// for the busy target to fill the 4 MiB ring, then let it go on.
	time.Sleep(time.Second)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stop)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	time.Sleep(machineTime(2500 * time.Millisecond))
	stopped := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(stopped)
	if err != nil {
		t.Fatalf("specprobe: %v\n%s", err, log.String())
	}
	if limit := tracer.DefaultFlushTimeout + machineTime(2*time.Second); took > limit {
		t.Errorf("specprobe took %s to detach after SIGINT, want under %s", took.Round(time.Millisecond), limit)
	}
	s.stop()
	summary := log.String()
	drops := summaryCount(t, summary, `kernel drops (\d+)`)
	if drops == 0 {
		t.Fatalf("no kernel drop: the ring did not fill while specprobe was stopped\n%s", summary)
	}
	if !strings.Contains(summary, "events lost on threads") {
		t.Errorf("the summary does not name the threads that lost events:\n%s", summary)
	}
	cutDropped := summaryCount(t, summary, `(\d+) on threads whose events the kernel lost`)
	truth := s.truth()
	spans := fileStageSpans(t, out)
	cut := checkServed(t, "stopped (detach)", spans, truth)
	pairs := 0
	for _, c := range truth {
		if c.Stage != spanschema.Accept {
			pairs += len(c.RIDs)
		}
	}
	if len(spans) > pairs {
		t.Errorf("%d stage spans, more than the %d (call, request) pairs the target logged", len(spans), pairs)
	}
	// A second after specprobe went on, the backlog is read and every step
	// is the target's again: each (call, request) the log has then has
	// its span.
	from, to := resumed.Add(machineTime(time.Second)).UnixNano(), stopped.Add(-500*time.Millisecond).UnixNano()
	missing, window := spansMissing(spans, truth, from, to)
	if window == 0 {
		t.Errorf("no stage call in the window after specprobe went on")
	}
	if len(missing) > 0 {
		t.Errorf("%d of the %d (call, request) pairs logged from a second after SIGCONT have no span, e.g. %s",
			len(missing), window, strings.Join(missing[:min(len(missing), 5)], "; "))
	}
	st, _ := os.Stat(out)
	t.Logf("kernel drops %d, calls cut by drops %d, cut spans %d, stage spans %d of %d logged pairs (all %d from a second after SIGCONT), output %d bytes, detach %s",
		drops, cutDropped, cut, len(spans), pairs, window, st.Size(), took.Round(time.Millisecond))
	if cutDropped == 0 && s.busy {
		t.Errorf("kernel drops but no call cut by them:\n%s", summary)
	}
	for _, l := range strings.Split(summary, "\n") {
		if strings.Contains(l, "calls cut") || strings.Contains(l, "kernel drops") || strings.Contains(l, "exporter") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

// spansMissing lists the (call, request) pairs of calls (accept aside) that
// began and ended within [from, to] and have no stage span, and how many
// pairs there were.
func spansMissing(spans []stageSpan, truth []truthCall, from, to int64) (missing []string, n int) {
	type key struct {
		tid   uint32
		stage string
		rid   string
	}
	starts := map[key][]int64{}
	for _, s := range spans {
		k := key{s.tid, s.stage, s.rid}
		starts[k] = append(starts[k], s.start)
	}
	slack := int64(clockSlack)
	for _, c := range truth {
		if c.Stage == spanschema.Accept || c.StartNs < from || c.EndNs > to {
			continue
		}
		for _, rid := range c.RIDs {
			n++
			found := false
			for _, st := range starts[key{c.TID, c.Stage, rid}] {
				found = found || (st >= c.StartNs-slack && st <= c.EndNs+slack)
			}
			if !found {
				missing = append(missing, fmt.Sprintf("%s of %s on thread %d at %s", c.Stage, rid, c.TID, fmtNs(c.StartNs)))
			}
		}
	}
	return missing, n
}

func summaryCount(t *testing.T, summary, pattern string) int {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("the summary has no %q:\n%s", pattern, summary)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
