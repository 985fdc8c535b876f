package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/spanschema"
	"github.com/specprobe/specprobe/tracer"
)

// Probe timestamps are taken inside the call, the target's own just outside
// it; the two clocks (boot time converted to wall time, CLOCK_REALTIME) agree
// to well under this.
const clockSlack = 100 * time.Microsecond

// expectedCall is what one request should show for one stage call.
type expectedCall struct {
	stage      string
	tid        uint32
	start, end int64
	numDrafts  *int64
	correct    *int64
	err        string // the exception a Python stage call raised
}

// expected turns the ground-truth log into per-request stage calls, with each
// accept's count moved onto the verify it followed on that thread.
func expected(truth []truthCall) map[string][]expectedCall {
	out := map[string][]expectedCall{}
	for _, c := range truth {
		for _, rid := range c.RIDs {
			if c.Stage == "accept" {
				calls := out[rid]
				for i := len(calls) - 1; i >= 0; i-- {
					if calls[i].stage == "verify" && calls[i].tid == c.TID {
						n := *c.Correct
						calls[i].correct = &n
						break
					}
				}
				continue
			}
			out[rid] = append(out[rid], expectedCall{stage: c.Stage, tid: c.TID, start: c.StartNs, end: c.EndNs, numDrafts: c.NumDrafts})
		}
	}
	return out
}

type gotCall struct {
	span    sdktrace.ReadOnlySpan
	stage   string
	tid     int64
	correct *int64
	drafts  *int64
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// compareWithTruth checks every stage span against the ground truth exactly:
// the same requests, the same calls in the same order on the same thread,
// the same accepted counts, and probe times inside the target's own times.
func compareWithTruth(t *testing.T, spans []sdktrace.ReadOnlySpan, truth []truthCall) {
	t.Helper()
	compareExpected(t, spans, expected(truth))
}

// compareExpected checks the stage spans of every request against want.
func compareExpected(t *testing.T, spans []sdktrace.ReadOnlySpan, want map[string][]expectedCall) {
	t.Helper()
	got := map[string][]gotCall{}
	byID := map[string]sdktrace.ReadOnlySpan{}
	roots := map[string]int{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
	}
	for _, s := range spans {
		a := attrs(s)
		rid := a["rid"].AsString()
		switch {
		case spanschema.IsRootSpan(s.Name(), s.Attributes()):
			roots[rid]++
			if s.Parent().IsValid() {
				t.Errorf("root span of %s has a parent", rid)
			}
			if want := spanschema.RootSpan("", rid); s.Name() != want {
				t.Errorf("root span of %s is %q, want %q", rid, s.Name(), want)
			}
		case strings.HasPrefix(s.Name(), "spec_"):
			g := gotCall{span: s, stage: strings.TrimPrefix(s.Name(), "spec_"), tid: a["thread.id"].AsInt64()}
			if v, ok := a["num_correct_drafts"]; ok {
				n := v.AsInt64()
				g.correct = &n
			}
			if v, ok := a["num_drafts"]; ok {
				n := v.AsInt64()
				g.drafts = &n
			}
			// SGLang's nesting: root > thread span > decode_forward > stage.
			fwd := byID[s.Parent().SpanID().String()]
			if fwd == nil || fwd.Name() != spanschema.DecodeForward {
				t.Errorf("%s span of %s is not under a decode_forward span", s.Name(), rid)
			} else if th := byID[fwd.Parent().SpanID().String()]; th == nil || attrs(th)["pid"].AsInt64() != g.tid {
				t.Errorf("decode_forward of %s is not under the span of its thread %d", rid, g.tid)
			} else if root := byID[th.Parent().SpanID().String()]; root == nil || attrs(root)["rid"].AsString() != rid || root.Parent().IsValid() {
				t.Errorf("the thread span of %s is not under the request's root span", rid)
			}
			if s.Status().Code == codes.Error {
				t.Errorf("%s span of %s has error status %q", s.Name(), rid, s.Status().Description)
			}
			got[rid] = append(got[rid], g)
		}
	}
	if len(got) != len(want) {
		t.Errorf("spans name %d requests, the target served %d", len(got), len(want))
	}
	mismatches := 0
	for rid, w := range want {
		g := got[rid]
		sort.Slice(g, func(i, j int) bool { return g[i].span.StartTime().Before(g[j].span.StartTime()) })
		if roots[rid] != 1 {
			t.Errorf("%s: %d root spans, want 1", rid, roots[rid])
		}
		if len(g) != len(w) {
			t.Errorf("%s: %d stage spans, want %d (%s vs %s)", rid, len(g), len(w), stages(g), wantStages(w))
			continue
		}
		for i := range w {
			if msg := diffCall(w[i], g[i]); msg != "" && mismatches < 10 {
				mismatches++
				t.Errorf("%s call %d: %s", rid, i, msg)
			}
		}
	}
}

func diffCall(w expectedCall, g gotCall) string {
	if w.stage != g.stage || int64(w.tid) != g.tid {
		return fmt.Sprintf("got %s on thread %d, want %s on thread %d", g.stage, g.tid, w.stage, w.tid)
	}
	if !sameInt(w.correct, g.correct) {
		return fmt.Sprintf("%s num_correct_drafts %s, want %s", g.stage, show(g.correct), show(w.correct))
	}
	if !sameInt(w.numDrafts, g.drafts) {
		return fmt.Sprintf("%s num_drafts %s, want %s", g.stage, show(g.drafts), show(w.numDrafts))
	}
	start, end := g.span.StartTime().UnixNano(), g.span.EndTime().UnixNano()
	if start < w.start-int64(clockSlack) || end > w.end+int64(clockSlack) || end < start {
		return fmt.Sprintf("%s span [%s, %s] not inside the target's own [%s, %s] (slack %s)",
			g.stage, fmtNs(start), fmtNs(end), fmtNs(w.start), fmtNs(w.end), clockSlack)
	}
	return ""
}

func sameInt(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(p *int64) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}

func stages(g []gotCall) string {
	var s []string
	for _, c := range g {
		s = append(s, c.stage)
	}
	return strings.Join(s, ",")
}

func wantStages(w []expectedCall) string {
	var s []string
	for _, c := range w {
		s = append(s, c.stage)
	}
	return strings.Join(s, ",")
}

// TestDemoMatchesGroundTruth traces whole runs of the demo target, with and
// without endbr64 at function entry, with uprobe_multi and with one perf-event
// link per site, and compares every span with the target's log.
func TestDemoMatchesGroundTruth(t *testing.T) {
	needRoot(t)
	cases := []struct {
		binary    string
		skipEndbr bool
		noMulti   bool
	}{
		{"specdemo", true, false},
		{"specdemo-cet", true, false},
		{"specdemo-cet", false, false},
		{"specdemo-cet", true, true},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/skip=%v/multi=%v", c.binary, c.skipEndbr, !c.noMulti)
		t.Run(name, func(t *testing.T) {
			d := startDemo(t, demoBinary(t, c.binary), "--threads", "2", "--batch", "3", "--requests", "24")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, spans := traceRun(t, ctx, tracer.Config{PID: d.cmd.Process.Pid, Spec: demoSpec(t), SkipEndbr: c.skipEndbr, NoMulti: c.noMulti}, func() { d.release(t) })
			waitExit(t, d, 0)
			if !res.TargetExited {
				t.Errorf("session ended with %q, want the target's exit", res.Reason)
			}
			if res.Drops != 0 || res.Read.ReadFailed != 0 || res.Stats.UnmatchedExits != 0 {
				t.Errorf("lost data: drops %d, unreadable %d, unmatched exits %d", res.Drops, res.Read.ReadFailed, res.Stats.UnmatchedExits)
			}
			truth := readTruth(t, d.log)
			if len(truth) == 0 {
				t.Fatal("the target logged no stage call")
			}
			if got := res.Read.Events; got != uint64(2*len(truth)) {
				t.Errorf("%d events, want %d (entry and exit of %d calls)", got, 2*len(truth), len(truth))
			}
			compareWithTruth(t, spans, truth)
			assertNoProbesLeft(t)
		})
	}
}
