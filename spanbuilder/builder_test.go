package spanbuilder_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/specprobe/specprobe/spanbuilder"
)

// Sites as the loader would arm them for the demo spec, plus a second draft
// site (another symbol of the same stage) for nesting tests.
const (
	siteDraft = iota
	siteVerify
	siteAccept
	siteExtend
	siteDraft2
)

var testSites = []spanbuilder.Site{
	siteDraft:  {Stage: "draft"},
	siteVerify: {Stage: "verify", Batch: true},
	siteAccept: {Stage: "accept"},
	siteExtend: {Stage: "draft_extend", Batch: true},
	siteDraft2: {Stage: "draft"},
}

const (
	offset = int64(1_700_000_000_000_000_000) // realtime - boottime
	pid    = 4242
)

// wall is what the builder's clock makes of a boot-time stamp.
func wall(ns uint64) time.Time { return time.Unix(0, int64(ns)+offset) }

type recorder struct{ steps []spanbuilder.Step }

func (r *recorder) Step(s spanbuilder.Step) { r.steps = append(r.steps, s) }

func newBuilder() (*spanbuilder.Builder, *recorder) {
	rec := &recorder{}
	return spanbuilder.New(testSites, spanbuilder.Clock{OffsetNs: offset}, rec), rec
}

func vals(kv ...any) ([4]spanbuilder.Value, int) {
	var out [4]spanbuilder.Value
	for i := 0; i < len(kv); i += 2 {
		out[i/2] = spanbuilder.Value{Name: kv[i].(string), V: int64(kv[i+1].(int))}
	}
	return out, len(kv) / 2
}

// enter and exit make one boundary event; kv are name, value pairs.
func enter(ns uint64, tid uint32, site int, rid string, kv ...any) *spanbuilder.Event {
	v, n := vals(kv...)
	return &spanbuilder.Event{BootNs: ns, PID: pid, TID: tid, Site: site, RequestID: rid, Values: v, NValues: n}
}

func exit(ns uint64, tid uint32, site int, rid string, kv ...any) *spanbuilder.Event {
	e := enter(ns, tid, site, rid, kv...)
	e.Exit = true
	return e
}

func add(b *spanbuilder.Builder, evs ...*spanbuilder.Event) {
	for _, e := range evs {
		b.Add(e)
	}
}

// call is the expected shape of a Call, without PID/TID (checked separately).
type call struct {
	stage      string
	start, end uint64
	rid        string
	values     []spanbuilder.Value
	err        string
}

func checkStep(t *testing.T, got spanbuilder.Step, rid string, tid uint32, want ...call) {
	t.Helper()
	if got.RequestID != rid || got.PID != pid || got.TID != tid {
		t.Errorf("step: rid %q pid %d tid %d, want %q %d %d", got.RequestID, got.PID, got.TID, rid, pid, tid)
	}
	if len(got.Calls) != len(want) {
		t.Fatalf("step %s: %d calls %+v, want %d", rid, len(got.Calls), got.Calls, len(want))
	}
	start, end := wall(want[0].start), wall(want[0].end)
	for i, w := range want {
		c := got.Calls[i]
		if w.start < uint64(start.UnixNano()-offset) {
			start = wall(w.start)
		}
		if w.end > uint64(end.UnixNano()-offset) {
			end = wall(w.end)
		}
		if c.Stage != w.stage || !c.Start.Equal(wall(w.start)) || !c.End.Equal(wall(w.end)) ||
			c.RequestID != w.rid || c.Err != w.err || c.PID != pid || c.TID != tid {
			t.Errorf("step %s call %d = {%s %v..%v rid %q err %q pid %d tid %d}, want {%s %v..%v rid %q err %q}",
				rid, i, c.Stage, c.Start.UnixNano()-offset, c.End.UnixNano()-offset, c.RequestID, c.Err, c.PID, c.TID,
				w.stage, w.start, w.end, w.rid, w.err)
		}
		if len(c.Values) != 0 || len(w.values) != 0 {
			if !reflect.DeepEqual(c.Values, w.values) {
				t.Errorf("step %s call %d (%s) values = %v, want %v", rid, i, c.Stage, c.Values, w.values)
			}
		}
	}
	if !got.Start.Equal(start) || !got.End.Equal(end) {
		t.Errorf("step %s: %v..%v, want %v..%v", rid, got.Start.UnixNano()-offset, got.End.UnixNano()-offset,
			start.UnixNano()-offset, end.UnixNano()-offset)
	}
}

func v(name string, x int64) spanbuilder.Value { return spanbuilder.Value{Name: name, V: x} }

// batchStep feeds one demo-shaped step (stepEvents) on tid, starting at t0,
// and returns the time it ends.
func batchStep(b *spanbuilder.Builder, tid uint32, t0 uint64, rids ...string) uint64 {
	evs := stepEvents(tid, t0, rids...)
	add(b, evs...)
	return evs[len(evs)-1].BootNs
}

func TestOneThreadBatchStep(t *testing.T) {
	b, rec := newBuilder()
	end := batchStep(b, 7, 1000, "req-one", "req-two")
	if end != 1000+40+70+20+30 {
		t.Fatalf("batchStep ended at %d", end)
	}
	if len(rec.steps) != 0 {
		t.Fatalf("steps are flushed lazily, got %d before the next step", len(rec.steps))
	}
	b.Flush(5000, "detached")
	if len(rec.steps) != 2 {
		t.Fatalf("got %d steps, want one per request", len(rec.steps))
	}
	// draft r1 1000-1010, draft r2 1020-1030, verify 1040-1100,
	// accept r1 1110-1115, accept r2 1120-1125, draft_extend 1130-1160.
	checkStep(t, rec.steps[0], "req-one", 7,
		call{"draft", 1000, 1010, "req-one", []spanbuilder.Value{v("num_drafts", 4)}, ""},
		call{"verify", 1040, 1100, "req-one", []spanbuilder.Value{v("num_correct_drafts", 1)}, ""},
		call{"draft_extend", 1130, 1160, "req-one", nil, ""})
	checkStep(t, rec.steps[1], "req-two", 7,
		call{"draft", 1020, 1030, "req-two", []spanbuilder.Value{v("num_drafts", 4)}, ""},
		call{"verify", 1040, 1100, "req-two", []spanbuilder.Value{v("num_correct_drafts", 2)}, ""},
		call{"draft_extend", 1130, 1160, "req-two", nil, ""})

	st := b.Stats
	if st.Events != 12 || st.Steps != 1 || st.Verifies != 1 || st.Errors != 0 || st.UnmatchedExits != 0 || st.UnattributedCalls != 0 {
		t.Errorf("stats = %+v", st)
	}
	if want := map[string]uint64{"draft": 2, "verify": 1, "accept": 2, "draft_extend": 1}; !reflect.DeepEqual(st.Calls, want) {
		t.Errorf("Stats.Calls = %v, want %v", st.Calls, want)
	}
	if st.Drafted() != 8 || st.Accepted != 3 {
		t.Errorf("Drafted %d Accepted %d, want 8 and 3", st.Drafted(), st.Accepted)
	}
}

func TestVerifyValuesNotShared(t *testing.T) {
	// The verify is one call shared by both requests: giving r2's accept to
	// r2's verify must not leak into r1's.
	b, rec := newBuilder()
	add(b,
		enter(0, 1, siteDraft, "r1"), exit(1, 1, siteDraft, ""),
		enter(2, 1, siteDraft, "r2"), exit(3, 1, siteDraft, ""),
		enter(4, 1, siteVerify, "", "batch", 2), exit(5, 1, siteVerify, ""),
		enter(6, 1, siteAccept, "r1", "num_correct_drafts", 3), exit(7, 1, siteAccept, ""),
		enter(8, 1, siteAccept, "r2", "num_correct_drafts", 0), exit(9, 1, siteAccept, ""),
	)
	b.Flush(10, "end")
	if len(rec.steps) != 2 {
		t.Fatalf("got %d steps", len(rec.steps))
	}
	want := map[string][]spanbuilder.Value{
		"r1": {v("batch", 2), v("num_correct_drafts", 3)},
		"r2": {v("batch", 2), v("num_correct_drafts", 0)},
	}
	for _, s := range rec.steps {
		if got := s.Calls[1].Values; s.Calls[1].Stage != "verify" || !reflect.DeepEqual(got, want[s.RequestID]) {
			t.Errorf("%s: verify values %v, want %v", s.RequestID, got, want[s.RequestID])
		}
	}
}

func TestTwoStepsInARow(t *testing.T) {
	b, rec := newBuilder()
	end := batchStep(b, 3, 100, "r")
	if len(rec.steps) != 0 {
		t.Fatalf("first step flushed before the next began")
	}
	add(b, enter(end+100, 3, siteDraft, "r"), exit(end+110, 3, siteDraft, "", "num_drafts", 2))
	if len(rec.steps) != 1 {
		t.Fatalf("a draft after draft_extend must flush the step: got %d steps", len(rec.steps))
	}
	checkStep(t, rec.steps[0], "r", 3,
		call{"draft", 100, 110, "r", []spanbuilder.Value{v("num_drafts", 4)}, ""},
		call{"verify", 120, 180, "r", []spanbuilder.Value{v("num_correct_drafts", 1)}, ""},
		call{"draft_extend", 200, 230, "r", nil, ""})
	add(b, enter(end+120, 3, siteVerify, ""), exit(end+150, 3, siteVerify, ""))
	if len(rec.steps) != 1 {
		t.Fatalf("second step flushed early")
	}
	b.Flush(end+1000, "done")
	if len(rec.steps) != 2 {
		t.Fatalf("Flush must hand over the second step: got %d", len(rec.steps))
	}
	checkStep(t, rec.steps[1], "r", 3,
		call{"draft", end + 100, end + 110, "r", []spanbuilder.Value{v("num_drafts", 2)}, ""},
		call{"verify", end + 120, end + 150, "r", nil, ""})
	if b.Stats.Steps != 2 {
		t.Errorf("Stats.Steps = %d, want 2", b.Stats.Steps)
	}
}

func TestVerifyAfterAcceptStartsNewStep(t *testing.T) {
	// No draft stage at all (a spec with verify and accept only): the next
	// verify, being earlier than accept, starts the next step.
	b, rec := newBuilder()
	add(b,
		enter(0, 1, siteVerify, ""), exit(10, 1, siteVerify, ""),
		enter(11, 1, siteAccept, "a", "num_correct_drafts", 1), exit(12, 1, siteAccept, ""),
		enter(20, 1, siteVerify, ""), exit(30, 1, siteVerify, ""),
	)
	if len(rec.steps) != 1 {
		t.Fatalf("got %d steps, want 1", len(rec.steps))
	}
	checkStep(t, rec.steps[0], "a", 1, call{"verify", 0, 10, "a", []spanbuilder.Value{v("num_correct_drafts", 1)}, ""})
}

func TestThreadsAreSeparate(t *testing.T) {
	b, rec := newBuilder()
	// Interleave two workers event by event.
	one := stepEvents(1, 100, "a1", "a2")
	two := stepEvents(2, 105, "b1")
	for i := 0; i < len(one) || i < len(two); i++ {
		if i < len(one) {
			b.Add(one[i])
		}
		if i < len(two) {
			b.Add(two[i])
		}
	}
	if len(rec.steps) != 0 {
		t.Fatalf("got %d steps before Flush", len(rec.steps))
	}
	b.Flush(10_000, "end")
	if len(rec.steps) != 3 {
		t.Fatalf("got %d steps, want 3", len(rec.steps))
	}
	// Flush goes thread by thread in TID order.
	byRID := stepsByRID(rec.steps)
	for i, s := range rec.steps {
		if wantTID := []uint32{1, 1, 2}[i]; s.TID != wantTID {
			t.Errorf("step %d (%s) on tid %d, want %d", i, s.RequestID, s.TID, wantTID)
		}
	}
	for rid, tid := range map[string]uint32{"a1": 1, "a2": 1, "b1": 2} {
		s := byRID[rid]
		if len(s.Calls) != 3 {
			t.Errorf("%s: %d calls, want draft, verify, draft_extend", rid, len(s.Calls))
		}
		for _, c := range s.Calls {
			if c.TID != tid || c.RequestID != rid {
				t.Errorf("%s: call %s from tid %d rid %q", rid, c.Stage, c.TID, c.RequestID)
			}
		}
	}
	if b.Stats.Steps != 2 || b.Stats.Verifies != 2 {
		t.Errorf("Steps %d Verifies %d, want 2 and 2", b.Stats.Steps, b.Stats.Verifies)
	}
}

func stepsByRID(steps []spanbuilder.Step) map[string]spanbuilder.Step {
	out := map[string]spanbuilder.Step{}
	for _, s := range steps {
		out[s.RequestID] = s
	}
	return out
}

type sinkFunc func(spanbuilder.Step)

func (f sinkFunc) Step(s spanbuilder.Step) { f(s) }

// stepEvents makes one demo-shaped step on tid, starting at t0: a draft per
// request (10ns, 20ns apart, reading num_drafts 4 at exit), one verify
// (60ns), an accept per request (accepting i+1 drafts, 10ns apart), one
// draft_extend (30ns).
func stepEvents(tid uint32, t0 uint64, rids ...string) []*spanbuilder.Event {
	var evs []*spanbuilder.Event
	ts := t0
	for _, r := range rids {
		evs = append(evs, enter(ts, tid, siteDraft, r), exit(ts+10, tid, siteDraft, "", "num_drafts", 4))
		ts += 20
	}
	evs = append(evs, enter(ts, tid, siteVerify, ""), exit(ts+60, tid, siteVerify, ""))
	ts += 70
	for i, r := range rids {
		evs = append(evs, enter(ts, tid, siteAccept, r, "num_correct_drafts", i+1), exit(ts+5, tid, siteAccept, ""))
		ts += 10
	}
	return append(evs, enter(ts, tid, siteExtend, ""), exit(ts+30, tid, siteExtend, ""))
}

func TestSameStageNesting(t *testing.T) {
	// A draft that calls another probed draft function (or itself).
	b, rec := newBuilder()
	add(b,
		enter(100, 1, siteDraft, "r"),
		enter(110, 1, siteDraft2, "r"),
		exit(120, 1, siteDraft2, "", "inner", 1),
		enter(130, 1, siteDraft, "r"), // recursion: the exit pairs with the latest entry
		exit(140, 1, siteDraft, "", "depth", 2),
		exit(150, 1, siteDraft, "", "depth", 1),
	)
	b.Flush(1000, "end")
	if len(rec.steps) != 1 {
		t.Fatalf("got %d steps", len(rec.steps))
	}
	// Calls come in the order they began.
	checkStep(t, rec.steps[0], "r", 1,
		call{"draft", 100, 150, "r", []spanbuilder.Value{v("depth", 1)}, ""},
		call{"draft", 110, 120, "r", []spanbuilder.Value{v("inner", 1)}, ""},
		call{"draft", 130, 140, "r", []spanbuilder.Value{v("depth", 2)}, ""})
	if b.Stats.Errors != 0 || b.Stats.UnmatchedExits != 0 {
		t.Errorf("stats = %+v", b.Stats)
	}
}

func TestNestedLaterStage(t *testing.T) {
	// An engine whose verify calls the per-request accept from inside. The doc
	// says accept values land on the latest verify of the thread; the builder
	// orders calls by their END, so the accept (ends first) is seen before the
	// verify, the verify then looks like the start of the next step, and the
	// accept's values are dropped with no verify to land on.
	b, rec := newBuilder()
	add(b,
		enter(100, 1, siteDraft, "r"), exit(110, 1, siteDraft, ""),
		enter(200, 1, siteVerify, ""),
		enter(210, 1, siteAccept, "r", "num_correct_drafts", 2), exit(220, 1, siteAccept, ""),
		exit(300, 1, siteVerify, ""),
	)
	b.Flush(1000, "end")
	ok := len(rec.steps) == 1 && len(rec.steps[0].Calls) == 2 && rec.steps[0].Calls[1].Stage == "verify" &&
		reflect.DeepEqual(rec.steps[0].Calls[1].Values, []spanbuilder.Value{v("num_correct_drafts", 2)})
	if !ok {
		t.Fatalf("the accept inside the verify does not land on it: got %d steps %+v, %d unattributed calls",
			len(rec.steps), rec.steps, b.Stats.UnattributedCalls)
	}
	checkStep(t, rec.steps[0], "r", 1,
		call{"draft", 100, 110, "r", nil, ""},
		call{"verify", 200, 300, "r", []spanbuilder.Value{v("num_correct_drafts", 2)}, ""})
}

func TestNoEmptyStepsToSink(t *testing.T) {
	// A step whose only call naming the request is an accept (the verify's
	// events were dropped, specprobe attached between verify and accept, or
	// the verify contains the accept as above): the accept makes no call of
	// its own, so the step for that request has nothing in it.
	for _, tc := range []struct {
		name string
		evs  []*spanbuilder.Event
	}{
		{"accept alone", []*spanbuilder.Event{enter(210, 1, siteAccept, "r", "num_correct_drafts", 2), exit(220, 1, siteAccept, "")}},
		{"accept inside verify", []*spanbuilder.Event{
			enter(200, 1, siteVerify, ""),
			enter(210, 1, siteAccept, "r", "num_correct_drafts", 2), exit(220, 1, siteAccept, ""),
			exit(300, 1, siteVerify, ""),
		}},
	} {
		name := tc.name
		b, rec := newBuilder()
		add(b, tc.evs...)
		b.Flush(1000, "end")
		for i, s := range rec.steps {
			if len(s.Calls) == 0 || s.Start.IsZero() || s.End.IsZero() {
				t.Errorf("%s: step %d handed to the sink with %d calls and times %v..%v",
					name, i, len(s.Calls), s.Start, s.End)
			}
		}
	}
}

func TestLostExit(t *testing.T) {
	b, rec := newBuilder()
	add(b,
		enter(100, 1, siteDraft, "a"),
		enter(110, 1, siteDraft2, "b"), // its exit is lost
		exit(150, 1, siteDraft, ""),
	)
	if got := b.OpenThreads(pid); len(got) != 0 {
		t.Errorf("OpenThreads = %v after the outer exit, want none", got)
	}
	b.Flush(1000, "end")
	if len(rec.steps) != 2 {
		t.Fatalf("got %d steps, want a and b", len(rec.steps))
	}
	byRID := stepsByRID(rec.steps)
	checkStep(t, byRID["a"], "a", 1, call{"draft", 100, 150, "a", nil, ""})
	checkStep(t, byRID["b"], "b", 1, call{"draft", 110, 150, "b", nil, "stage exit was not seen"})
	if b.Stats.Errors != 1 || b.Stats.UnmatchedExits != 0 {
		t.Errorf("Errors %d UnmatchedExits %d, want 1 and 0", b.Stats.Errors, b.Stats.UnmatchedExits)
	}
}

func TestExitWithoutEntry(t *testing.T) {
	b, rec := newBuilder()
	add(b, exit(100, 9, siteVerify, ""))
	add(b, enter(200, 9, siteDraft, "r"), exit(210, 9, siteAccept, ""), exit(220, 9, siteDraft, ""))
	if b.Stats.UnmatchedExits != 2 || b.Stats.Events != 4 {
		t.Errorf("UnmatchedExits %d Events %d, want 2 and 4", b.Stats.UnmatchedExits, b.Stats.Events)
	}
	b.Flush(1000, "end")
	if len(rec.steps) != 1 || len(rec.steps[0].Calls) != 1 || rec.steps[0].Calls[0].Err != "" {
		t.Fatalf("steps = %+v, want the draft alone, without error", rec.steps)
	}
	if b.Stats.Calls["verify"] != 0 || b.Stats.Calls["accept"] != 0 {
		t.Errorf("unmatched exits were counted as calls: %v", b.Stats.Calls)
	}
}

func TestThreadGoneMidVerify(t *testing.T) {
	b, rec := newBuilder()
	add(b,
		enter(100, 5, siteDraft, "r"), exit(110, 5, siteDraft, ""),
		enter(120, 6, siteDraft, "other"), // another thread, still open
		enter(200, 5, siteVerify, ""),
	)
	if got := b.OpenThreads(pid); len(got) != 2 {
		t.Errorf("OpenThreads = %v, want 5 and 6", got)
	}
	b.ThreadGone(5, 250, "thread exited")
	if len(rec.steps) != 1 {
		t.Fatalf("ThreadGone must flush the step: got %d steps", len(rec.steps))
	}
	checkStep(t, rec.steps[0], "r", 5,
		call{"draft", 100, 110, "r", nil, ""},
		call{"verify", 200, 250, "r", nil, "thread exited"})
	if got := b.OpenThreads(pid); !reflect.DeepEqual(got, []uint32{6}) {
		t.Errorf("OpenThreads = %v, want [6]", got)
	}
	if b.Stats.Errors != 1 {
		t.Errorf("Errors = %d, want 1", b.Stats.Errors)
	}
	// The thread is forgotten: a late exit is unmatched, a second ThreadGone is a no-op.
	add(b, exit(260, 5, siteVerify, ""))
	b.ThreadGone(5, 300, "again")
	b.ThreadGone(12345, 300, "never seen")
	if b.Stats.UnmatchedExits != 1 || len(rec.steps) != 1 {
		t.Errorf("UnmatchedExits %d steps %d, want 1 and 1", b.Stats.UnmatchedExits, len(rec.steps))
	}
}

// A thread that exited between steps, no call open, is known until the
// tracer says it is gone: its step ends then, without an error, and its ID
// is free for a new thread.
func TestThreadGoneBetweenSteps(t *testing.T) {
	b, rec := newBuilder()
	add(b,
		enter(100, 5, siteDraft, "r"), exit(110, 5, siteDraft, ""),
		enter(120, 5, siteVerify, ""), exit(130, 5, siteVerify, ""),
		enter(140, 6, siteDraft, "q"),
	)
	if got := b.OpenThreads(pid); !reflect.DeepEqual(got, []uint32{6}) {
		t.Errorf("OpenThreads = %v, want [6]", got)
	}
	got := b.Threads(pid)
	slices.Sort(got)
	if !reflect.DeepEqual(got, []uint32{5, 6}) || len(b.Threads(pid+1)) != 0 {
		t.Errorf("Threads = %v (another process: %v), want [5 6] and none", got, b.Threads(pid+1))
	}
	if len(rec.steps) != 0 {
		t.Fatalf("got %d steps before the thread was gone, want its step still open", len(rec.steps))
	}
	b.ThreadGone(5, 200, "thread exited during the stage")
	if len(rec.steps) != 1 {
		t.Fatalf("got %d steps, want thread 5's", len(rec.steps))
	}
	checkStep(t, rec.steps[0], "r", 5,
		call{"draft", 100, 110, "r", nil, ""},
		call{"verify", 120, 130, "r", nil, ""})
	if got := b.Threads(pid); !reflect.DeepEqual(got, []uint32{6}) || b.Stats.Errors != 0 {
		t.Errorf("Threads = %v, errors %d; want [6] and none", got, b.Stats.Errors)
	}
	// A new thread given ID 5 starts its own step.
	add(b, enter(300, 5, siteDraft, "s"), exit(310, 5, siteDraft, ""))
	b.ThreadGone(5, 400, "thread exited during the stage")
	if len(rec.steps) != 2 {
		t.Fatalf("got %d steps, want 2", len(rec.steps))
	}
	checkStep(t, rec.steps[1], "s", 5, call{"draft", 300, 310, "s", nil, ""})
}

func TestFlushClosesOpenCalls(t *testing.T) {
	b, rec := newBuilder()
	add(b,
		enter(100, 20, siteDraft, "late"),
		enter(100, 10, siteDraft, "early"), exit(110, 10, siteDraft, ""),
		enter(120, 10, siteVerify, ""),
	)
	b.Flush(500, "specprobe detached")
	if len(rec.steps) != 2 {
		t.Fatalf("got %d steps", len(rec.steps))
	}
	checkStep(t, rec.steps[0], "early", 10,
		call{"draft", 100, 110, "early", nil, ""},
		call{"verify", 120, 500, "early", nil, "specprobe detached"})
	checkStep(t, rec.steps[1], "late", 20, call{"draft", 100, 500, "late", nil, "specprobe detached"})
	if len(b.OpenThreads(pid)) != 0 {
		t.Errorf("threads left open after Flush: %v", b.OpenThreads(pid))
	}
	b.Flush(600, "twice")
	if len(rec.steps) != 2 {
		t.Errorf("a second Flush produced steps")
	}
}

func TestUnattributedStep(t *testing.T) {
	b, rec := newBuilder()
	add(b,
		enter(100, 1, siteVerify, ""), exit(110, 1, siteVerify, ""),
		enter(120, 1, siteExtend, ""), exit(130, 1, siteExtend, ""),
		enter(140, 1, siteDraft, ""), exit(150, 1, siteDraft, ""), // a draft that read no request id
	)
	b.Flush(1000, "end")
	if len(rec.steps) != 0 {
		t.Errorf("got %d steps for calls naming no request", len(rec.steps))
	}
	// verify, draft_extend | draft: two steps, neither named a request. Both
	// are steps the target ran, so both count.
	if b.Stats.UnattributedCalls != 3 || b.Stats.Steps != 2 || b.Stats.UnattributedSteps != 2 {
		t.Errorf("UnattributedCalls %d Steps %d UnattributedSteps %d, want 3, 2 and 2",
			b.Stats.UnattributedCalls, b.Stats.Steps, b.Stats.UnattributedSteps)
	}
	if b.Stats.Calls["verify"] != 1 || b.Stats.Verifies != 1 {
		t.Errorf("unattributed calls still count as calls: %v", b.Stats.Calls)
	}
}

func TestRequestIDAtExit(t *testing.T) {
	b, rec := newBuilder()
	add(b,
		enter(100, 1, siteDraft, "stale"), exit(110, 1, siteDraft, "fresh"),
		enter(120, 1, siteDraft, ""), exit(130, 1, siteDraft, "only-at-exit"),
		enter(140, 1, siteDraft, "only-at-entry", "a", 1), exit(150, 1, siteDraft, "", "b", 2),
	)
	b.Flush(1000, "end")
	var rids []string
	for _, s := range rec.steps {
		rids = append(rids, s.RequestID)
	}
	if want := []string{"fresh", "only-at-exit", "only-at-entry"}; !reflect.DeepEqual(rids, want) {
		t.Fatalf("steps for %q, want %q", rids, want)
	}
	if got := rec.steps[2].Calls[0].Values; !reflect.DeepEqual(got, []spanbuilder.Value{v("a", 1), v("b", 2)}) {
		t.Errorf("entry and exit values = %v, want a=1 then b=2", got)
	}
}

func TestEventReuse(t *testing.T) {
	// The loader decodes into one Event and reuses it: the builder must copy.
	b, rec := newBuilder()
	var e spanbuilder.Event
	set := func(ns uint64, site int, exit bool, rid string, name string, x int64) {
		e = spanbuilder.Event{BootNs: ns, PID: pid, TID: 1, Site: site, Exit: exit, RequestID: rid}
		if name != "" {
			e.Values[0], e.NValues = v(name, x), 1
		}
		b.Add(&e)
	}
	set(100, siteDraft, false, "r", "x", 1)
	set(110, siteDraft, true, "", "y", 2)
	set(120, siteVerify, false, "", "z", 3)
	set(130, siteVerify, true, "", "", 0)
	b.Flush(1000, "end")
	if len(rec.steps) != 1 {
		t.Fatalf("got %d steps", len(rec.steps))
	}
	checkStep(t, rec.steps[0], "r", 1,
		call{"draft", 100, 110, "r", []spanbuilder.Value{v("x", 1), v("y", 2)}, ""},
		call{"verify", 120, 130, "r", []spanbuilder.Value{v("z", 3)}, ""})
}

func TestStatsPercentile(t *testing.T) {
	b, _ := newBuilder()
	if _, ok := b.Stats.Percentile("draft", 50); ok {
		t.Errorf("Percentile of a stage never seen reported ok")
	}
	// Ten drafts lasting 100, 90, ..., 10 ns.
	for i := uint64(0); i < 10; i++ {
		add(b, enter(i*1000, 1, siteDraft, "r"), exit(i*1000+(10-i)*10, 1, siteDraft, "", "num_drafts", 3))
	}
	add(b, enter(20_000, 1, siteVerify, ""), exit(20_500, 1, siteVerify, ""))
	add(b, enter(21_000, 1, siteAccept, "r", "num_correct_drafts", 2), exit(21_001, 1, siteAccept, ""))
	for _, tc := range []struct {
		stage string
		p     float64
		want  time.Duration
	}{
		{"draft", 0, 10}, {"draft", 50, 50}, {"draft", 90, 90}, {"draft", 100, 100},
		{"verify", 50, 500}, {"accept", 99, 1},
	} {
		got, ok := b.Stats.Percentile(tc.stage, tc.p)
		if !ok || got != tc.want {
			t.Errorf("Percentile(%s, %v) = %v %v, want %v", tc.stage, tc.p, got, ok, tc.want)
		}
	}
	if b.Stats.Drafted() != 30 || b.Stats.Accepted != 2 || b.Stats.Calls["draft"] != 10 {
		t.Errorf("Drafted %d Accepted %d drafts %d", b.Stats.Drafted(), b.Stats.Accepted, b.Stats.Calls["draft"])
	}
}

func TestStatsWindowKeepsLatest(t *testing.T) {
	b, _ := newBuilder()
	// 5000 one-ns drafts, then 4096 of 7ns: the window only holds the latest.
	ts := uint64(0)
	for i := 0; i < 5000+4096; i++ {
		d := uint64(1)
		if i >= 5000 {
			d = 7
		}
		add(b, enter(ts, 1, siteDraft, "r"), exit(ts+d, 1, siteDraft, ""))
		ts += 10
	}
	if got, _ := b.Stats.Percentile("draft", 0); got != 7 {
		t.Errorf("p0 = %v after the window turned over, want 7ns", got)
	}
}

func TestClock(t *testing.T) {
	c := spanbuilder.Clock{OffsetNs: 5}
	if got := c.Wall(10); !got.Equal(time.Unix(0, 15)) {
		t.Errorf("Wall(10) = %v", got)
	}
	real := spanbuilder.NewClock()
	now := real.Wall(spanbuilder.BootNow())
	if d := time.Since(now); d < -time.Second || d > time.Second {
		t.Errorf("NewClock: boot now maps to %v, %v from time.Now", now, d)
	}
}

// TestCancelWithdrawsEntry: an entry that turned out not to be a call is
// withdrawn; the real call around it keeps its own entry and exit.
func TestCancelWithdrawsEntry(t *testing.T) {
	b, rec := newBuilder()
	cancel := exit(125, 1, siteDraft, "")
	cancel.Cancel = true
	add(b,
		enter(100, 1, siteDraft, "r"),
		enter(120, 1, siteDraft, "r"), // a reference, not a call
		cancel,
		exit(150, 1, siteDraft, "", "n", 1),
	)
	b.Flush(1000, "end")
	if len(rec.steps) != 1 {
		t.Fatalf("got %d steps", len(rec.steps))
	}
	checkStep(t, rec.steps[0], "r", 1, call{"draft", 100, 150, "r", []spanbuilder.Value{v("n", 1)}, ""})
	if b.Stats.Withdrawn != 1 || b.Stats.Errors != 0 {
		t.Errorf("stats = %+v", b.Stats)
	}
}

func TestDraftInsideVerify(t *testing.T) {
	// SGLang's NGRAM worker drafts inside its verify (forward_batch_generation
	// calls _prepare_for_speculative_decoding): each top-level verify that
	// reaches back to the draft stage begins a step, though top-level calls
	// alone (verify, verify) would not tell the steps apart.
	b, rec := newBuilder()
	add(b,
		enter(100, 1, siteVerify, ""),
		enter(110, 1, siteDraft, "r"),
		exit(120, 1, siteDraft, ""),
		exit(150, 1, siteVerify, ""),
		enter(200, 1, siteVerify, ""),
		enter(210, 1, siteDraft, "r"),
		exit(220, 1, siteDraft, ""),
		raised(exit(250, 1, siteVerify, "")),
		// A verify retried after it raised (no nested draft) stays in its step.
		enter(260, 1, siteVerify, ""),
		exit(270, 1, siteVerify, ""),
	)
	b.Flush(1000, "end")
	if len(rec.steps) != 2 {
		t.Fatalf("got %d steps, want 2: %+v", len(rec.steps), rec.steps)
	}
	checkStep(t, rec.steps[0], "r", 1,
		call{"verify", 100, 150, "r", nil, ""},
		call{"draft", 110, 120, "r", nil, ""})
	checkStep(t, rec.steps[1], "r", 1,
		call{"verify", 200, 250, "r", nil, "raised VerifyFailed"},
		call{"draft", 210, 220, "r", nil, ""},
		call{"verify", 260, 270, "r", nil, ""})
}

func serving(e *spanbuilder.Event, rids ...string) *spanbuilder.Event {
	e.Requests = rids
	return e
}

func raised(e *spanbuilder.Event) *spanbuilder.Event {
	e.Err = "raised VerifyFailed"
	return e
}

// TestRepeatedBatchStage: a step whose only top-level stage is a batch
// stage (SGLang DFlash verifies, and drafts, inside one call): each call
// that follows one that did not raise begins the next step; a per-request
// stage repeats within its step.
func TestRepeatedBatchStage(t *testing.T) {
	b, rec := newBuilder()
	add(b,
		enter(100, 1, siteVerify, ""), serving(exit(110, 1, siteVerify, ""), "r"),
		enter(200, 1, siteVerify, ""), raised(serving(exit(210, 1, siteVerify, ""), "r")),
		enter(220, 1, siteVerify, ""), serving(exit(230, 1, siteVerify, ""), "r"),
		enter(300, 1, siteVerify, ""), serving(exit(310, 1, siteVerify, ""), "r"),
		// Per-request drafts, then their batch verify: one step.
		enter(400, 2, siteDraft, "a"), exit(410, 2, siteDraft, ""),
		enter(420, 2, siteDraft, "b"), exit(430, 2, siteDraft, ""),
		enter(440, 2, siteVerify, ""), exit(450, 2, siteVerify, ""),
	)
	b.Flush(1000, "end")
	var got [][]uint64 // per step, its calls' starts
	for _, st := range rec.steps {
		var starts []uint64
		for _, c := range st.Calls {
			starts = append(starts, uint64(c.Start.UnixNano()-offset))
		}
		got = append(got, starts)
	}
	want := [][]uint64{{100}, {200, 220}, {300}, {400, 440}, {420, 440}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps (their calls' starts) %v, want %v", got, want)
	}
}

// A spec may read num_drafts at several stages; they count the same drafts,
// so the acceptance's denominator takes one side: the verify side (verify,
// and accept whose values join it) when read there, else the draft side.
func TestStatsDraftedCountedOnce(t *testing.T) {
	for _, c := range []struct {
		name                        string
		draft, verify, accept, want int // num_drafts read at the stage, -1 for none
	}{
		{"draft only", 4, -1, -1, 4},
		{"verify only", -1, 4, -1, 4},
		{"accept only", -1, -1, 4, 4},
		{"draft and verify", 4, 4, -1, 4},
		{"draft and accept", 4, -1, 4, 4},
		{"none", -1, -1, -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, _ := newBuilder()
			kv := func(n int) []any {
				if n < 0 {
					return nil
				}
				return []any{"num_drafts", n}
			}
			for step := uint64(0); step < 5; step++ {
				at := step * 1000
				add(b,
					enter(at, 1, siteDraft, "r"), exit(at+10, 1, siteDraft, "", kv(c.draft)...),
					enter(at+20, 1, siteVerify, ""), exit(at+30, 1, siteVerify, "", kv(c.verify)...),
					enter(at+40, 1, siteAccept, "r", append(kv(c.accept), "num_correct_drafts", 1)...), exit(at+50, 1, siteAccept, ""))
			}
			b.Flush(10_000, "end")
			if got := b.Stats.Drafted(); got != int64(5*c.want) {
				t.Errorf("Drafted() = %d, want %d", got, 5*c.want)
			}
			if b.Stats.Accepted != 5 || b.Stats.Steps != 5 {
				t.Errorf("Accepted %d Steps %d, want 5 and 5", b.Stats.Accepted, b.Stats.Steps)
			}
		})
	}
}
