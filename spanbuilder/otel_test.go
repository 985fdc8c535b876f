package spanbuilder_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
)

// spanRecorder keeps the spans a sink hands on, read back as SDK spans.
type spanRecorder struct {
	sink  *spanbuilder.OTelSink
	ended []*spanrec.Span
}

func (r *spanRecorder) add(spans []*spanrec.Span) {
	for _, s := range spans {
		c := *s
		r.ended = append(r.ended, &c)
	}
}

func (r *spanRecorder) Ended() []sdktrace.ReadOnlySpan { return sdkSpans(r.ended) }

// Started is every span begun: ended, or still open.
func (r *spanRecorder) Started() []sdktrace.ReadOnlySpan {
	return append(r.Ended(), sdkSpans(r.sink.OpenSpans())...)
}

func sdkSpans(spans []*spanrec.Span) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		out = append(out, spanrec.ToSDK(s))
	}
	return out
}

func newOTel(t *testing.T) (*spanbuilder.OTelSink, *spanRecorder) {
	t.Helper()
	r := &spanRecorder{}
	r.sink = spanbuilder.NewOTelSink(r.add, nil, "specprobe-test")
	return r.sink, r
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func at(ns int) time.Time { return t0.Add(time.Duration(ns)) }

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// startedSpans reads the spans started so far, open ones included.
func startedSpans(sr *spanRecorder) []sdktrace.ReadOnlySpan { return sr.Started() }

func byName(spans []sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		out[s.Name()] = append(out[s.Name()], s)
	}
	return out
}

func one(t *testing.T, m map[string][]sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	if len(m[name]) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(m[name]), name)
	}
	return m[name][0]
}

func checkAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]attribute.Value) {
	t.Helper()
	got := attrs(s)
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: %s = %v, want %v", s.Name(), k, g.Emit(), w.Emit())
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: attributes %v, want exactly %v", s.Name(), s.Attributes(), want)
	}
}

func checkTimes(t *testing.T, s sdktrace.ReadOnlySpan, start, end time.Time) {
	t.Helper()
	if !s.StartTime().Equal(start) || !s.EndTime().Equal(end) {
		t.Errorf("%s: %v..%v, want %v..%v", s.Name(), s.StartTime(), s.EndTime(), start, end)
	}
}

func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("%s is not a child of %s", child.Name(), parent.Name())
	}
}

var scheduler = spanschema.Thread{Label: "Scheduler", HostID: "0123456789abcdef", TID: 11,
	TP: 0, PP: spanschema.NoRank, DP: spanschema.NoRank}

func TestOTelSinkStep(t *testing.T) {
	sink, sr := newOTel(t)
	var asked [][2]uint32
	sink.Thread = func(pid, tid uint32) spanschema.Thread {
		asked = append(asked, [2]uint32{pid, tid})
		return scheduler
	}
	rid := "0123456789abcdef"
	sink.Step(spanbuilder.Step{
		RequestID: rid, PID: 10, TID: 11, Start: at(0), End: at(300),
		Calls: []spanbuilder.Call{
			{Stage: "draft", Start: at(0), End: at(50), RequestID: rid, Values: []spanbuilder.Value{{Name: "num_drafts", V: 4}}},
			{Stage: "verify", Start: at(60), End: at(200), RequestID: rid,
				Values: []spanbuilder.Value{{Name: "batch_size", V: 8}, {Name: "num_correct_drafts", V: 3}, {Name: "ip", V: 0x1234}}},
			{Stage: "draft_extend", Start: at(210), End: at(300), RequestID: rid},
		},
	})
	sink.Step(spanbuilder.Step{
		RequestID: rid, PID: 10, TID: 11, Start: at(400), End: at(500),
		Calls: []spanbuilder.Call{{Stage: "verify", Start: at(400), End: at(500), RequestID: rid}},
	})
	if len(asked) != 1 || asked[0] != [2]uint32{10, 11} {
		t.Errorf("Thread asked for %v, want once for pid 10 tid 11", asked)
	}
	ended := byName(sr.Ended())
	if len(sr.Ended()) != 6 {
		t.Fatalf("%d spans ended, want two decode_loop and four stages (root, thread and decode_forward stay open)", len(sr.Ended()))
	}
	started := byName(startedSpans(sr))
	root := one(t, started, " Req 01234567")
	if root.EndTime() != (time.Time{}) {
		t.Errorf("root ended at %v before Expire or Close", root.EndTime())
	}
	if root.Parent().IsValid() {
		t.Errorf("root has a parent")
	}
	if !root.StartTime().Equal(at(0)) {
		t.Errorf("root starts at %v, want the step start %v", root.StartTime(), at(0))
	}
	checkAttrs(t, root, map[attribute.Key]attribute.Value{
		"rid": attribute.StringValue(rid), "module": attribute.StringValue("sglang::request"),
		"specprobe.root": attribute.StringValue("sglang"),
	})

	thread := one(t, started, "Scheduler [TP 0] (host:01234567 | pid:11)")
	childOf(t, thread, root)
	checkAttrs(t, thread, map[attribute.Key]attribute.Value{
		"tp_rank": attribute.IntValue(0), "host_id": attribute.StringValue("0123456789abcdef"), "pid": attribute.IntValue(11),
		"thread_label": attribute.StringValue("Scheduler"), "thread.id": attribute.IntValue(11), "rid": attribute.StringValue(rid),
	})
	fwd := one(t, started, "decode_forward")
	childOf(t, fwd, thread)
	checkAttrs(t, fwd, map[attribute.Key]attribute.Value{"rid": attribute.StringValue(rid), "thread.id": attribute.IntValue(11)})

	loops := ended["decode_loop"]
	if len(loops) != 2 {
		t.Fatalf("%d decode_loop spans, want 2", len(loops))
	}
	for i, l := range loops {
		childOf(t, l, fwd)
		checkAttrs(t, l, map[attribute.Key]attribute.Value{"rid": attribute.StringValue(rid), "thread.id": attribute.IntValue(11),
			"decode_ct": attribute.Int64Value(int64(i))})
		if l.Status().Code != codes.Unset {
			t.Errorf("decode_loop status %v, want unset", l.Status())
		}
	}
	checkTimes(t, loops[0], at(0), at(300))
	checkTimes(t, loops[1], at(400), at(500))

	base := func(stage string, ct int64) map[attribute.Key]attribute.Value {
		return map[attribute.Key]attribute.Value{
			"rid": attribute.StringValue(rid), "thread.id": attribute.IntValue(11), "specprobe.stage": attribute.StringValue(stage),
			"decode_ct": attribute.Int64Value(ct),
		}
	}
	draft := one(t, ended, "spec_draft")
	childOf(t, draft, fwd)
	checkTimes(t, draft, at(0), at(50))
	want := base("draft", 0)
	want["num_drafts"] = attribute.Int64Value(4)
	checkAttrs(t, draft, want)

	verifies := ended["spec_verify"]
	if len(verifies) != 2 {
		t.Fatalf("%d spec_verify spans, want 2", len(verifies))
	}
	verify := verifies[0]
	childOf(t, verify, fwd)
	checkTimes(t, verify, at(60), at(200))
	want = base("verify", 0)
	want["num_correct_drafts"] = attribute.Int64Value(3)
	want["accepted_tokens"] = attribute.Int64Value(3)
	want["specprobe.batch_size"] = attribute.Int64Value(8)
	checkAttrs(t, verify, want)
	checkAttrs(t, verifies[1], base("verify", 1))

	ext := one(t, ended, "spec_draft_extend")
	childOf(t, ext, fwd)
	checkTimes(t, ext, at(210), at(300))
	checkAttrs(t, ext, base("draft_extend", 0))

	for _, s := range sr.Ended() {
		if s.Status().Code != codes.Unset {
			t.Errorf("%s: status %v", s.Name(), s.Status())
		}
	}
	sink.Close()
	closed := byName(sr.Ended())
	checkTimes(t, one(t, closed, root.Name()), at(0), at(500))
	checkTimes(t, one(t, closed, thread.Name()), at(0), at(500))
	checkTimes(t, one(t, closed, fwd.Name()), at(0), at(500))
}

// A request whose steps run on two threads gets a thread span and a
// decode_forward on each, and one decode_ct sequence.
func TestOTelSinkTwoThreads(t *testing.T) {
	sink, sr := newOTel(t)
	sink.Thread = func(pid, tid uint32) spanschema.Thread {
		th := scheduler
		th.TID = int(tid)
		return th
	}
	for i, tid := range []uint32{11, 12, 11} {
		start := 100 * i
		sink.Step(spanbuilder.Step{RequestID: "r", PID: 10, TID: tid, Start: at(start), End: at(start + 50),
			Calls: []spanbuilder.Call{{Stage: "verify", Start: at(start), End: at(start + 50)}}})
	}
	sink.Close()
	ended := byName(sr.Ended())
	root := one(t, ended, " Req r")
	t11, t12 := one(t, ended, "Scheduler [TP 0] (host:01234567 | pid:11)"), one(t, ended, "Scheduler [TP 0] (host:01234567 | pid:12)")
	childOf(t, t11, root)
	childOf(t, t12, root)
	checkTimes(t, t11, at(0), at(250))
	checkTimes(t, t12, at(100), at(150))
	if len(ended["decode_forward"]) != 2 {
		t.Fatalf("%d decode_forward spans, want one per thread", len(ended["decode_forward"]))
	}
	var cts []int64
	for _, l := range ended["decode_loop"] {
		cts = append(cts, attrs(l)["decode_ct"].AsInt64())
	}
	if len(cts) != 3 || cts[0] != 0 || cts[1] != 1 || cts[2] != 2 {
		t.Errorf("decode_ct %v, want 0 1 2 across threads", cts)
	}
}

func TestOTelSinkShortRID(t *testing.T) {
	sink, sr := newOTel(t)
	sink.Step(spanbuilder.Step{RequestID: "ab", Start: at(0), End: at(1),
		Calls: []spanbuilder.Call{{Stage: "verify", Start: at(0), End: at(1)}}})
	one(t, byName(startedSpans(sr)), " Req ab")
	// Without a Thread func the thread span still has SGLang's shape.
	one(t, byName(startedSpans(sr)), "thread(host:unknown | pid:0)")
}

func TestOTelSinkError(t *testing.T) {
	sink, sr := newOTel(t)
	sink.Step(spanbuilder.Step{RequestID: "r", TID: 1, Start: at(0), End: at(100),
		Calls: []spanbuilder.Call{
			{Stage: "draft", Start: at(0), End: at(10)},
			{Stage: "verify", Start: at(20), End: at(100), Err: "thread exited"},
		}})
	sink.Close()
	ended := byName(sr.Ended())
	if s := one(t, ended, "spec_verify").Status(); s.Code != codes.Error || s.Description != "thread exited" {
		t.Errorf("spec_verify status %+v, want error 'thread exited'", s)
	}
	if s := one(t, ended, "decode_loop").Status(); s.Code != codes.Error || s.Description != "thread exited" {
		t.Errorf("decode_loop status %+v, want the call's error", s)
	}
	for _, name := range []string{"spec_draft", "decode_forward", " Req r"} {
		if s := one(t, ended, name).Status(); s.Code != codes.Unset {
			t.Errorf("%s status %+v, want unset", name, s)
		}
	}
}

func TestOTelSinkRootLifetime(t *testing.T) {
	sink, sr := newOTel(t)
	sink.IdleAfter = time.Second
	step := func(rid string, start, end int) {
		sink.Step(spanbuilder.Step{RequestID: rid, Start: at(start), End: at(end),
			Calls: []spanbuilder.Call{{Stage: "verify", Start: at(start), End: at(end)}}})
	}
	step("first-request", 0, 100)
	step("first-request", 200, 300) // same root
	step("second-request", 0, 5000)
	started := byName(startedSpans(sr))
	root := one(t, started, " Req first-re")
	if len(started["decode_loop"]) != 3 || len(started["decode_forward"]) != 2 {
		t.Errorf("%d decode_loop and %d decode_forward spans, want 3 and 2", len(started["decode_loop"]), len(started["decode_forward"]))
	}
	for _, f := range started["decode_forward"] {
		if attrs(f)["rid"].AsString() == "first-request" {
			if th := parentOf(startedSpans(sr), f); th == nil || th.Parent().SpanID() != root.SpanContext().SpanID() {
				t.Errorf("decode_forward of first-request is not under its thread span under the root")
			}
		}
	}
	rootsEnded := func() map[string]sdktrace.ReadOnlySpan {
		out := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range sr.Ended() {
			if !s.Parent().IsValid() {
				out[attrs(s)["rid"].AsString()] = s
			}
		}
		return out
	}

	sink.Expire(at(300).Add(time.Second - 1))
	if len(rootsEnded()) != 0 {
		t.Fatalf("a root ended before IdleAfter")
	}
	sink.Expire(at(300).Add(time.Second))
	ended := rootsEnded()
	if len(ended) != 1 || ended["first-request"] == nil {
		t.Fatalf("roots ended after IdleAfter: %v, want first-request only", ended)
	}
	checkTimes(t, ended["first-request"], at(0), at(300))

	// A step after expiry makes a new root.
	step("first-request", 10_000, 10_100)
	sink.Close()
	ended = rootsEnded()
	if len(ended) != 2 || ended["second-request"] == nil {
		t.Fatalf("Close ended %d roots, want second-request too", len(ended))
	}
	checkTimes(t, ended["second-request"], at(0), at(5000))
	var firsts []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == " Req first-re" {
			firsts = append(firsts, s)
		}
	}
	if len(firsts) != 2 || firsts[0].SpanContext().TraceID() == firsts[1].SpanContext().TraceID() {
		t.Errorf("a step after expiry should start a new trace: %d roots", len(firsts))
	}
	sink.Close() // nothing left: a no-op
	// 4 steps of decode_loop + spec_verify, and 3 roots with a thread span and a decode_forward each.
	if n := len(sr.Ended()); n != 4*2+3*3 {
		t.Errorf("%d spans ended in all, want 17", n)
	}
}

func parentOf(spans []sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	for _, p := range spans {
		if p.SpanContext().SpanID() == s.Parent().SpanID() {
			return p
		}
	}
	return nil
}

func TestBuilderIntoOTel(t *testing.T) {
	sink, sr := newOTel(t)
	b := spanbuilder.New(testSites, spanbuilder.Clock{OffsetNs: offset}, sink)
	batchStep(b, 7, 1000, "req-one-xyz", "req-two-xyz")
	b.Flush(5000, "detached")
	sink.Close()
	ended := byName(sr.Ended())
	if len(ended[" Req req-one-"]) != 1 || len(ended[" Req req-two-"]) != 1 || len(ended["decode_forward"]) != 2 || len(ended["decode_loop"]) != 2 ||
		len(ended["spec_draft"]) != 2 || len(ended["spec_verify"]) != 2 || len(ended["spec_draft_extend"]) != 2 ||
		len(ended["spec_accept"]) != 0 {
		t.Fatalf("spans: %v", ended)
	}
	for _, v := range ended["spec_verify"] {
		a := attrs(v)
		want := map[string]int64{"req-one-xyz": 1, "req-two-xyz": 2}[a["rid"].AsString()]
		if a["num_correct_drafts"].AsInt64() != want || a["accepted_tokens"].AsInt64() != want {
			t.Errorf("verify for %s: %v", a["rid"].AsString(), v.Attributes())
		}
		checkTimes(t, v, wall(1040), wall(1100))
	}
	for _, r := range ended[" Req req-one-"] {
		checkTimes(t, r, wall(1000), wall(1160))
	}
}

// With the vLLM style every request's root is llm_request carrying its full
// id: two "cmpl-…" requests whose ids share their first 8 characters are
// two roots of two traces, told apart by gen_ai.request.id.
func TestOTelSinkVLLMRoots(t *testing.T) {
	sink, sr := newOTel(t)
	sink.Thread = func(pid, tid uint32) spanschema.Thread { return scheduler }
	sink.Root = spanschema.RootVLLM
	rids := []string{"cmpl-89f3a1c2-0", "cmpl-89f3a1c2-1"}
	for i, rid := range rids {
		sink.Step(spanbuilder.Step{
			RequestID: rid, PID: 10, TID: 11, Start: at(100 * i), End: at(100*i + 50),
			Calls: []spanbuilder.Call{{Stage: "verify", Start: at(100 * i), End: at(100*i + 50), RequestID: rid}},
		})
	}
	sink.Close()
	ids, traces := map[string]bool{}, map[[16]byte]bool{}
	for _, s := range sr.Ended() {
		if s.Name() != "llm_request" {
			continue
		}
		if !spanschema.IsRootSpan(s.Name(), s.Attributes()) {
			t.Errorf("llm_request not recognised as a root: %v", s.Attributes())
		}
		for _, kv := range s.Attributes() {
			if kv.Key == spanschema.KeyGenAIRequestID {
				ids[kv.Value.AsString()] = true
			}
		}
		traces[s.SpanContext().TraceID()] = true
	}
	if len(ids) != 2 || !ids[rids[0]] || !ids[rids[1]] || len(traces) != 2 {
		t.Errorf("roots carry ids %v in %d traces, want %v in 2", ids, len(traces), rids)
	}
}
