package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/specprobe/specprobe/tracer"
)

// TestTargetDiesMidStage kills the target from inside a verify: the session
// ends by itself, the verify in progress is closed with an error status, and
// everything the target finished is still traced.
func TestTargetDiesMidStage(t *testing.T) {
	needRoot(t)
	d := startDemo(t, demoBinary(t, "specdemo-cet"), "--threads", "2", "--requests", "40", "--crash-in-verify", "5")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, spans := traceRun(t, ctx, tracer.Config{PID: d.cmd.Process.Pid, Spec: demoSpec(t), SkipEndbr: true}, func() { d.release(t) })
	waitExit(t, d, 3)
	if !res.TargetExited {
		t.Fatalf("session ended with %q, want the target's exit", res.Reason)
	}
	truth := readTruth(t, d.log)
	completed := map[string]int{}
	for _, c := range truth {
		if c.Stage == "accept" {
			continue
		}
		for _, rid := range c.RIDs {
			completed[rid+" "+c.Stage]++
		}
	}
	traced := map[string]int{}
	crashedVerifies := 0
	for _, s := range spans {
		if !strings.HasPrefix(s.Name(), "spec_") {
			continue
		}
		if s.Status().Code == codes.Error {
			if s.Name() == "spec_verify" && strings.Contains(s.Status().Description, "exited") {
				crashedVerifies++
			}
			continue
		}
		traced[attrs(s)["rid"].AsString()+" "+strings.TrimPrefix(s.Name(), "spec_")]++
	}
	if crashedVerifies == 0 {
		t.Error("no spec_verify span ended with an error status for the verify the target died in")
	}
	for k, n := range completed {
		// The other thread may have finished a call and died before logging it.
		if traced[k] != n && traced[k] != n+1 {
			t.Errorf("%s: %d spans for %d completed calls", k, traced[k], n)
		}
	}
	assertNoProbesLeft(t)
}

// TestDurationDetachLeavesTargetUnharmed stops tracing while the target is
// busy: every probe goes away and the target carries on to a clean exit.
func TestDurationDetachLeavesTargetUnharmed(t *testing.T) {
	needRoot(t)
	d := startDemo(t, demoBinary(t, "specdemo-cet"), "--threads", "2", "--requests", "1000000")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, spans := traceRun(t, ctx, tracer.Config{PID: d.cmd.Process.Pid, Spec: demoSpec(t), SkipEndbr: true, Duration: 500 * time.Millisecond}, func() { d.release(t) })
	if res.TargetExited || !strings.Contains(res.Reason, "duration") {
		t.Fatalf("session ended with %q, want the duration", res.Reason)
	}
	if res.Stats.Steps == 0 || len(spans) == 0 {
		t.Fatal("nothing traced in 500ms")
	}
	assertNoProbesLeft(t)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, d, 0)
	// The target logged on after the detach: it kept running normally.
	truth := readTruth(t, d.log)
	last := truth[len(truth)-1].EndNs
	var spanEnd int64
	for _, s := range spans {
		spanEnd = max(spanEnd, s.EndTime().UnixNano())
	}
	if last <= spanEnd {
		t.Errorf("the target logged nothing after specprobe detached (its last call ended %s, the last span %s)", fmtNs(last), fmtNs(spanEnd))
	}
}
