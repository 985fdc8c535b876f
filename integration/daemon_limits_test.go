package integration

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/daemon"
	"github.com/specprobe/specprobe/spanschema"
)

// TestDaemonMaxProcesses: with max_processes 1 a second matching process
// waits, counted as skipped, and is attached as soon as the first exits;
// parked until then, it is traced exactly.
func TestDaemonMaxProcesses(t *testing.T) {
	needRoot(t)
	cfg := daemon.Defaults()
	cfg.Listen, cfg.MaxProcesses = "127.0.0.1:0", 1
	f := startFleet(t, cfg)
	bin := demoBinary(t, "specdemo-cet")
	first := startDemo(t, bin, "--requests", "4")
	f.next(t, first.cmd.Process.Pid, "attached", 10*time.Second)
	second := startDemo(t, bin, "--threads", "2", "--requests", "10")
	// Polls the daemon's own count until it has seen the second process and
	// held it back.
	for deadline := time.Now().Add(10 * time.Second); f.d.Totals().SkippedAtLimit == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second target was not held back at max_processes 1")
		}
	}
	for _, ti := range f.d.Targets() {
		if ti.PID == second.cmd.Process.Pid {
			t.Fatalf("PID %d traced with max_processes 1 while another is", ti.PID)
		}
	}
	first.release(t)
	waitExit(t, first, 0)
	f.next(t, first.cmd.Process.Pid, "detached", 20*time.Second)
	f.next(t, second.cmd.Process.Pid, "attached", 10*time.Second)
	second.release(t)
	waitExit(t, second, 0)
	f.next(t, second.cmd.Process.Pid, "detached", 20*time.Second)
	compareWithTruth(t, f.spansOf(second.cmd.Process.Pid), readTruth(t, second.log))
}

// TestDaemonEventBudget: past the event budget, requests are sampled whole:
// each exported span says the rate, fewer requests than served are
// exported, and every exported request has all of its calls.
func TestDaemonEventBudget(t *testing.T) {
	needRoot(t)
	cfg := daemon.Defaults()
	cfg.Listen, cfg.EventBudget = "127.0.0.1:0", 200
	f := startFleet(t, cfg)
	d := startDemo(t, demoBinary(t, "specdemo-cet"), "--threads", "2", "--batch", "2", "--requests", "600")
	pid := d.cmd.Process.Pid
	f.next(t, pid, "attached", 10*time.Second)
	d.release(t)
	waitExit(t, d, 0)
	f.next(t, pid, "detached", 30*time.Second)
	spans := f.spansOf(pid)
	kept := map[string]bool{}
	minRate := 1.0
	for _, s := range spans {
		rate, ok := 0.0, false
		for _, kv := range s.Attributes() {
			if kv.Key == daemon.SamplingRateKey {
				rate, ok = kv.Value.AsFloat64(), true
			}
		}
		if !ok {
			t.Fatalf("%s span without %s", s.Name(), daemon.SamplingRateKey)
		}
		minRate = min(minRate, rate)
		if spanschema.IsRootSpan(s.Name(), s.Attributes()) {
			kept[attrs(s)["rid"].AsString()] = true
		}
	}
	want := expected(readTruth(t, d.log))
	t.Logf("exported %d of %d requests, lowest rate %.4f", len(kept), len(want), minRate)
	if minRate >= 1 || len(kept) >= len(want) || len(kept) == 0 {
		t.Fatalf("no sampling past the budget: %d of %d requests kept, lowest rate %v", len(kept), len(want), minRate)
	}
	for rid := range want {
		if !kept[rid] {
			delete(want, rid)
		}
	}
	compareExpected(t, onlyRequests(spans, kept), want)
}

func onlyRequests(spans []sdktrace.ReadOnlySpan, rids map[string]bool) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if rids[attrs(s)["rid"].AsString()] {
			out = append(out, s)
		}
	}
	return out
}
