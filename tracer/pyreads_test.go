package tracer

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
)

type steps struct{ out []spanbuilder.Step }

func (s *steps) Step(st spanbuilder.Step) { s.out = append(s.out, st) }

func pyTarget(t *testing.T, name, yaml string, roles ...loader.PyRole) loader.PyTarget {
	t.Helper()
	src := "engine: t\nstages:\n  " + name + ":\n    module: m\n    qualname: f\n" + yaml
	if name != probes.Verify { // every spec has a verify
		src += "  verify: {module: m, qualname: g}\n"
	}
	sp, err := probes.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p := &loader.PyProgram{}
	for _, r := range roles {
		p.Fields = append(p.Fields, loader.PyField{Role: r, Path: "x", Steps: []string{"x"}})
	}
	return loader.PyTarget{Stage: sp.Stages[name], Program: p}
}

func read(fields ...loader.PyValues) *loader.PyCallRead { return &loader.PyCallRead{Fields: fields} }

func list(v ...any) loader.PyValues { return loader.PyValues{Values: v, List: true} }

func one(v any) loader.PyValues { return loader.PyValues{Values: []any{v}} }

// pyCalls in a table: what a call's read at the trap makes of its event.
func TestPyCallsHandle(t *testing.T) {
	verify := pyTarget(t, "verify", "    requests: {arg: b, path: reqs, id: rid}\n    when: {arg: b, path: mode, equals: 2}\n", loader.RoleRequests, loader.RoleWhen)
	bad := &loader.PyReadError{Code: 4, Step: 0, Item: 2}
	for _, tc := range []struct {
		name     string
		read     *loader.PyCallRead
		span     bool
		cancel   bool
		requests []string
		failed   uint64
		lastErr  string
	}{
		{"requests read", read(list("a", "b"), one(int64(2))), true, false, []string{"a", "b"}, 0, ""},
		{"int ids", read(list(int64(7)), one(int64(2))), true, false, []string{"7"}, 0, ""},
		{"empty batch: serves none", read(list(), one(int64(2))), true, false, []string{}, 0, ""},
		{"left out by when", read(list("a"), one(int64(1))), true, true, nil, 0, ""},
		{"when unreadable: left out, said", read(list("a"), loader.PyValues{Err: bad}), true, true, nil, 1, "when: x: at x: item 2"},
		{"requests unreadable: serves none", read(loader.PyValues{Err: bad}, one(int64(2))), true, false, []string{}, 1, "verify: x"},
		{"not an id", read(list(loader.PyObject{Type: 0x10}), one(int64(2))), true, false, []string{}, 1, "not a str or int id"},
		{"nothing read at the trap", &loader.PyCallRead{Err: &loader.PyReadError{Code: 10, Step: -1, Item: -1}}, true, true, nil, 1, "frame was not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pyCalls{sites: func(int) (*loader.PyTarget, bool) { return &verify, true }, pending: map[callKey][]pendingRead{}}
			if !p.handle(&spanbuilder.Event{Site: 0, TID: 1}) {
				t.Fatal("the entry made no span")
			}
			e := &spanbuilder.Event{Site: 0, TID: 1, Exit: true, BootNs: 5, Read: tc.read}
			if got := p.handle(e); got != tc.span || e.Cancel != tc.cancel || !reflect.DeepEqual(e.Requests, tc.requests) {
				t.Errorf("span %v cancel %v requests %q, want %v %v %q", got, e.Cancel, e.Requests, tc.span, tc.cancel, tc.requests)
			}
			if p.Stats.Failed != tc.failed || !strings.Contains(p.Stats.LastError, tc.lastErr) {
				t.Errorf("failed %d (%q), want %d (%q)", p.Stats.Failed, p.Stats.LastError, tc.failed, tc.lastErr)
			}
		})
	}
}

// With same_batch, a call whose when cannot be read (its argument, a
// temporary, was freed by the return) is kept only when a call nested in
// it passed its own when and read the batch: NGRAM's verify around its
// draft. A call kept before it began (the previous step's) is not taken,
// and nothing is kept without same_batch.
func TestWhenUnreadableNested(t *testing.T) {
	const when = "    requests: {arg: b, path: reqs, id: rid}\n    when: {arg: b, path: mode, equals: [2, 5]}\n"
	verify := pyTarget(t, "verify", when, loader.RoleRequests, loader.RoleWhen)
	draft := pyTarget(t, "draft", when, loader.RoleRequests, loader.RoleWhen)
	freed := &loader.PyReadError{Code: 4, Step: 0, Item: -1}
	gone := read(loader.PyValues{Err: freed}, loader.PyValues{Err: freed})
	type ev struct {
		site int
		exit bool
		at   uint64
		read *loader.PyCallRead
	}
	for _, tc := range []struct {
		name      string
		sameBatch bool
		events    []ev
		keep      bool
		requests  []string
	}{
		{"draft nested, kept", true, []ev{{0, false, 1, nil}, {1, false, 2, nil}, {1, true, 3, read(list("a", "b"), one(int64(5)))}, {0, true, 4, gone}}, true, []string{"a", "b"}},
		{"draft nested, left out (prefill)", true, []ev{{0, false, 1, nil}, {1, false, 2, nil}, {1, true, 3, read(list("a"), one(int64(1)))}, {0, true, 4, gone}}, false, nil},
		{"no call nested", true, []ev{{0, false, 1, nil}, {0, true, 4, gone}}, false, nil},
		{"the previous step's draft", true, []ev{{0, false, 1, nil}, {1, false, 2, nil}, {1, true, 3, read(list("a"), one(int64(5)))}, {0, true, 4, read(list("a"), one(int64(2)))},
			{0, false, 5, nil}, {0, true, 6, gone}}, false, nil},
		{"without same_batch", false, []ev{{0, false, 1, nil}, {1, false, 2, nil}, {1, true, 3, read(list("a", "b"), one(int64(5)))}, {0, true, 4, gone}}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets := []*loader.PyTarget{&verify, &draft}
			p := &pyCalls{sites: func(i int) (*loader.PyTarget, bool) { return targets[i], true }, pending: map[callKey][]pendingRead{}}
			if tc.sameBatch {
				p.trackSteps()
			}
			var last *spanbuilder.Event
			for _, v := range tc.events {
				last = &spanbuilder.Event{Site: v.site, TID: 1, Exit: v.exit, BootNs: v.at, Read: v.read}
				p.handle(last)
			}
			if last.Cancel == tc.keep || !reflect.DeepEqual(last.Requests, tc.requests) {
				t.Errorf("verify kept %v with %q, want %v with %q", !last.Cancel, last.Requests, tc.keep, tc.requests)
			}
			if want := map[bool]uint64{true: 1}[tc.keep]; p.Stats.WhenFromStep != want {
				t.Errorf("WhenFromStep %d, want %d", p.Stats.WhenFromStep, want)
			}
		})
	}
}

// A when's value is kept if it equals any of the spec's constants, as
// written; a value of another kind is an error, not a silent miss.
func TestWhenOneOf(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want []string
		keep bool
		err  string
	}{
		{int64(2), []string{"2", "5"}, true, ""},
		{int64(5), []string{"2", "5"}, true, ""},
		{int64(1), []string{"2", "5"}, false, ""},
		{uint64(5), []string{"5"}, true, ""},
		{"decode", []string{"extend", "decode"}, true, ""},
		{true, []string{"True"}, true, ""},
		{true, []string{"true"}, true, ""},
		{false, []string{"True"}, false, ""},
		{nil, []string{"2", "5"}, false, "a None, not a str, int or bool to compare with 2 or 5"},
	} {
		keep, err := (&pyCalls{}).oneOf(tc.v, tc.want)
		if keep != tc.keep || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%v in %q: %v %v, want %v %q", tc.v, tc.want, keep, err, tc.keep, tc.err)
		}
	}
}

// An accept stage's read goes to the count matching; a verify's own counts
// straight onto its spans; a request not in drafted gets none.
func TestPyCallsCounts(t *testing.T) {
	verify := pyTarget(t, "verify", "    requests: {arg: b, id: rid}\n    accepted: {arg: return, path: \"[*]\", add: -1}\n    drafted: {arg: b, path: \"drafted[*]\"}\n",
		loader.RoleRequests, loader.RoleAccepted, loader.RoleDrafted)
	out := &steps{}
	late := spanbuilder.NewLateAccept(out)
	p := &pyCalls{sites: func(int) (*loader.PyTarget, bool) { return &verify, true }, late: late, pending: map[callKey][]pendingRead{}}
	p.handle(&spanbuilder.Event{TID: 1})
	e := &spanbuilder.Event{TID: 1, Exit: true, BootNs: 9, Read: read(list("a", "b"), list(int64(3), int64(1)), list("a"))}
	p.handle(e)
	for _, rid := range []string{"a", "b"} {
		late.Step(spanbuilder.Step{RequestID: rid, Calls: []spanbuilder.Call{{Stage: "verify", TID: 1, EndBoot: 9}}})
	}
	late.Expire(math.MaxUint64)
	if len(out.out) != 2 {
		t.Fatalf("%d steps out", len(out.out))
	}
	if v := out.out[0].Calls[0].Values; len(v) != 1 || v[0].V != 2 {
		t.Errorf("a: %v, want num_correct_drafts 2 (3 - 1)", v)
	}
	if v := out.out[1].Calls[0].Values; len(v) != 0 {
		t.Errorf("b had no drafts, got %v", v)
	}
	// A count list that does not line up with the requests gives none.
	p.handle(&spanbuilder.Event{TID: 1})
	p.handle(&spanbuilder.Event{TID: 1, Exit: true, BootNs: 10, Read: read(list("a", "b"), list(int64(3)), list("a"))})
	if !strings.Contains(p.Stats.LastError, "2 requests but 1 accepted counts") {
		t.Errorf("last error %q", p.Stats.LastError)
	}
}

// A count's sub is read with the counts and taken from each, never below
// 0; a sub that is not one int gives no counts, said.
func TestPyCallsCountsSub(t *testing.T) {
	verify := pyTarget(t, "verify", "    requests: {arg: b, id: rid}\n    accepted: {arg: return, path: \"[*]\", sub: {arg: self, path: n}}\n",
		loader.RoleRequests, loader.RoleAccepted, loader.RoleSub)
	out := &steps{}
	late := spanbuilder.NewLateAccept(out)
	p := &pyCalls{sites: func(int) (*loader.PyTarget, bool) { return &verify, true }, late: late, pending: map[callKey][]pendingRead{}}
	p.handle(&spanbuilder.Event{TID: 1})
	p.handle(&spanbuilder.Event{TID: 1, Exit: true, BootNs: 9, Read: read(list("a", "b"), list(int64(5), int64(1)), one(int64(2)))})
	for _, rid := range []string{"a", "b"} {
		late.Step(spanbuilder.Step{RequestID: rid, Calls: []spanbuilder.Call{{Stage: "verify", TID: 1, EndBoot: 9}}})
	}
	late.Expire(math.MaxUint64)
	var got []int64
	for _, st := range out.out {
		for _, v := range st.Calls[0].Values {
			got = append(got, v.V)
		}
	}
	if !reflect.DeepEqual(got, []int64{3, 0}) {
		t.Errorf("counts %v, want [3 0] (5-2, and 1-2 clamped at 0)", got)
	}
	p.handle(&spanbuilder.Event{TID: 1})
	p.handle(&spanbuilder.Event{TID: 1, Exit: true, BootNs: 10, Read: read(list("a"), list(int64(5)), list(int64(2)))})
	if !strings.Contains(p.Stats.LastError, "not one int to take from each count") {
		t.Errorf("last error %q", p.Stats.LastError)
	}
}

// stepPos tells where same_batch's steps begin, as the span builder does:
// an earlier stage, or the step's first stage again after a call that did
// not raise.
func TestStepPos(t *testing.T) {
	type ev struct {
		stage string
		exit  bool
		err   string
	}
	in, out := func(s string) ev { return ev{s, false, ""} }, func(s string) ev { return ev{s, true, ""} }
	for _, c := range []struct {
		name  string
		evs   []ev
		begun []bool // per entry
	}{
		{"eagle", []ev{in("draft"), out("draft"), in("verify"), out("verify"), in("draft_extend"), out("draft_extend"), in("draft")}, []bool{false, false, false, true}},
		{"one stage", []ev{in("verify"), out("verify"), in("verify"), out("verify"), in("verify")}, []bool{false, true, true}},
		{"retry after a raise", []ev{in("verify"), {"verify", true, "raised X"}, in("verify"), out("verify"), in("verify")}, []bool{false, false, true}},
		{"draft nested in the verify", []ev{in("verify"), in("draft"), out("draft"), out("verify"), in("verify"), in("draft")}, []bool{false, true, false, true}},
	} {
		var s *stepPos
		var got []bool
		for _, e := range c.evs {
			s = s.next(e.stage, &spanbuilder.Event{Exit: e.exit, Err: e.err})
			if !e.exit {
				got = append(got, s.begun)
			}
		}
		if !reflect.DeepEqual(got, c.begun) {
			t.Errorf("%s: steps begun %v, want %v", c.name, got, c.begun)
		}
	}
}

// The one rule both readers of accept counts follow (the trap's and the
// user-space one once wrote it apart): counts pair with requests by
// position, and a request missing from drafted had no drafts.
func TestAssembleCounts(t *testing.T) {
	nd := int64(spanbuilder.NoDrafts)
	for _, c := range []struct {
		name         string
		rids         []string
		counts       []int64
		readsDrafted bool
		drafted      []string
		want         []int64
		err          string
	}{
		{"no drafted list", []string{"a", "b"}, []int64{2, 0}, false, nil, []int64{2, 0}, ""},
		{"one without drafts", []string{"a", "b"}, []int64{2, 3}, true, []string{"b"}, []int64{nd, 3}, ""},
		{"drafted in another order", []string{"a", "b"}, []int64{1, 0}, true, []string{"b", "a"}, []int64{1, 0}, ""},
		{"drafted read empty", []string{"a"}, []int64{4}, true, nil, []int64{nd}, ""},
		{"more counts than requests", []string{"a"}, []int64{1, 2}, false, nil, nil, "1 requests but 2 accepted counts"},
		{"fewer counts", []string{"a", "b"}, []int64{1}, true, []string{"a"}, nil, "2 requests but 1 accepted counts"},
		{"empty batch", nil, nil, true, nil, nil, ""},
	} {
		_, got, err := assembleCounts(c.rids, c.counts, c.readsDrafted, c.drafted)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// countsSeen is what the count matching was told, in order.
type countsSeen struct{ told []string }

func (c *countsSeen) Verify(spanbuilder.VerifyKey, []string) {}
func (c *countsSeen) Counts(tid uint32, _ uint64, _ []string, counts []int64) {
	c.told = append(c.told, fmt.Sprintf("thread %d counts %v", tid, counts))
}
func (c *countsSeen) Unreadable(uint32, uint64) {}
func (c *countsSeen) LostOn(uint32, uint64)     {}
func (c *countsSeen) Gone(tid uint32, _ uint64) {
	c.told = append(c.told, fmt.Sprintf("thread %d gone", tid))
}

// A thread that exited is forgotten: a new thread the kernel gives its ID
// does not take the dead thread's batch (same_batch), the other threads
// keep theirs, and counts the dead thread read and held are handed on.
func TestPyCallsForget(t *testing.T) {
	const reqs = "    requests: {arg: b, path: reqs, id: rid}\n"
	verify := pyTarget(t, "verify", reqs, loader.RoleRequests)
	draft := pyTarget(t, "draft", reqs, loader.RoleRequests)
	targets := []*loader.PyTarget{&verify, &draft}
	failed := read(loader.PyValues{Err: &loader.PyReadError{Code: 4, Step: 0, Item: -1}})
	run := func(forget bool) (*pyCalls, *countsSeen, []string) {
		seen := &countsSeen{}
		p := &pyCalls{sites: func(i int) (*loader.PyTarget, bool) { return targets[i], true }, pending: map[callKey][]pendingRead{}, match: seen,
			user: &userReads{held: map[uint32]heldCounts{}}}
		p.trackSteps()
		for _, tid := range []uint32{1, 2} { // each drafts, then thread 1 dies
			p.handle(&spanbuilder.Event{Site: 1, TID: tid, BootNs: 1})
			p.handle(&spanbuilder.Event{Site: 1, TID: tid, Exit: true, BootNs: 2, Read: read(list("a"))})
			p.pending[callKey{0, tid}] = []pendingRead{{}}
		}
		p.user.held[1] = heldCounts{rids: []string{"a"}, counts: []int64{3}, at: 2, end: 3}
		if forget {
			p.forget(1, 10)
		}
		p.handle(&spanbuilder.Event{Site: 0, TID: 1, BootNs: 20})
		e := &spanbuilder.Event{Site: 0, TID: 1, Exit: true, BootNs: 21, Read: failed}
		p.handle(e)
		return p, seen, e.Requests
	}
	if _, _, got := run(false); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("without forget the verify took %q, want the dead thread's [a] (else this test proves nothing)", got)
	}
	p, seen, got := run(true)
	if len(got) != 0 || p.Stats.FromStep != 0 {
		t.Errorf("the new thread's verify took %q (FromStep %d), want none", got, p.Stats.FromStep)
	}
	if want := []string{"thread 1 counts [3]", "thread 1 gone"}; !reflect.DeepEqual(seen.told, want) {
		t.Errorf("the count matching was told %q, want %q", seen.told, want)
	}
	if _, ok := p.user.held[1]; ok {
		t.Error("thread 1's held counts are still held")
	}
	for k := range p.pending {
		if k.tid == 1 {
			t.Errorf("pending reads of thread 1 kept: %v", k)
		}
	}
	if _, ok := p.pending[callKey{0, 2}]; !ok {
		t.Error("thread 2's pending reads were dropped")
	}
	if r, ok := p.stepReads[2]; !ok || !reflect.DeepEqual(r.rids, []string{"a"}) {
		t.Errorf("thread 2's step read %v, want [a]", r.rids)
	}
	if _, ok := p.entered[callKey{1, 2}]; !ok {
		t.Error("thread 2's entries were dropped")
	}
}

// An event that makes no span (an accept's) still tells the builder that
// the kernel lost the thread's events before it, as a withdrawal: else the
// calls the thread had open stay open until a later exit of their stage
// closes them, many steps long (seen with specprobe stopped under load).
func TestFilterKeepsDrops(t *testing.T) {
	accept := pyTarget(t, "accept", "    requests: {arg: b, path: reqs, id: rid}\n    accepted: {arg: r, path: \"[*]\"}\n", loader.RoleRequests, loader.RoleAccepted)
	p := &pySession{slots: map[uint32]bool{1: true},
		calls: &pyCalls{sites: func(int) (*loader.PyTarget, bool) { return &accept, true }, pending: map[callKey][]pendingRead{}}}
	var got []spanbuilder.Event
	add := p.filter(func(e *spanbuilder.Event) { got = append(got, *e) })
	add(&spanbuilder.Event{TID: 1})
	if len(got) != 0 {
		t.Fatalf("an accept's entry was handed on: %+v", got)
	}
	add(&spanbuilder.Event{TID: 1, Dropped: 3})
	if len(got) != 1 || got[0].Dropped != 3 || !got[0].Cancel {
		t.Errorf("an accept's entry after lost events: %+v, want one withdrawal carrying 3 lost", got)
	}
}
