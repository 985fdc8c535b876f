package spanbuilder_test

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/specprobe/specprobe/spanbuilder"
)

// SGLang main's EAGLE V2 (eagle_worker_v2.py at 13a7ffeceaf3) as the
// catalog's sglang spec sees it: draft, verify and draft_extend, each of a
// batch.
const (
	pyDraft = iota
	pyVerify
	pyExtend
)

var pySites = []spanbuilder.Site{
	pyDraft:  {Stage: "draft", Batch: true},
	pyVerify: {Stage: "verify", Batch: true},
	pyExtend: {Stage: "draft_extend", Batch: true},
}

// pyCall is a batch call of site from t to t+5 serving rids.
func pyCall(site int, t uint64, rids ...string) []*spanbuilder.Event {
	return []*spanbuilder.Event{enter(t, 9, site, ""), serving(exit(t+5, 9, site, ""), rids...)}
}

// stepsByCall is each step's request and its calls as "stage@start".
func stepsByCall(steps []spanbuilder.Step) []string {
	var out []string
	for _, s := range steps {
		line := s.RequestID + ":"
		for _, c := range s.Calls {
			line += " " + c.Stage + "@" + strconv.FormatInt(c.Start.UnixNano()-offset, 10)
		}
		out = append(out, line)
	}
	return out
}

func feedCalls(b *spanbuilder.Builder, calls ...[]*spanbuilder.Event) {
	for _, c := range calls {
		add(b, c...)
	}
}

// With pipeline parallelism the last stage drafts the next round at the end
// of the current step (the PP tail draft, draft(batch, with_topology=True)),
// and the next step verifies without drafting: each draft belongs to the step
// of the verify that checks its tokens, whatever step's time it ran in.
func TestPPTailDraft(t *testing.T) {
	rec := &recorder{}
	b := spanbuilder.New(pySites, spanbuilder.Clock{OffsetNs: offset}, rec)
	feedCalls(b,
		pyCall(pyDraft, 100, "a", "b"), // the first decode step drafts at its head
		pyCall(pyVerify, 110, "a", "b"),
		pyCall(pyExtend, 120, "a", "b"),
		pyCall(pyDraft, 130, "a", "b"), // tail draft: the next round's
		pyCall(pyVerify, 200, "a", "b"),
		pyCall(pyExtend, 210, "a", "b"),
		pyCall(pyDraft, 220, "a"), // b finished: the tail draft drafts for a only
		pyCall(pyVerify, 300, "a"),
		pyCall(pyExtend, 310, "a"),
	)
	b.Flush(1000, "end")
	want := []string{
		"a: draft@100 verify@110 draft_extend@120", "b: draft@100 verify@110 draft_extend@120",
		"a: draft@130 verify@200 draft_extend@210", "b: draft@130 verify@200 draft_extend@210",
		"a: draft@220 verify@300 draft_extend@310",
	}
	if got := stepsByCall(rec.steps); !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n got %q\nwant %q", got, want)
	}
}

// _forward_dp_spec_prefill_coordination drafts an empty idle batch in a
// prefill step (draft_extend for a prefill is not a traced stage): that
// draft serves no request, so it makes no span, and the decode step after it
// is whole.
func TestIdleEmptyDraft(t *testing.T) {
	rec := &recorder{}
	b := spanbuilder.New(pySites, spanbuilder.Clock{OffsetNs: offset}, rec)
	feedCalls(b,
		pyCall(pyDraft, 100), // the idle batch: no request
		pyCall(pyDraft, 200, "a"),
		pyCall(pyVerify, 210, "a"),
		pyCall(pyExtend, 220, "a"),
	)
	b.Flush(1000, "end")
	want := []string{"a: draft@200 verify@210 draft_extend@220"}
	if got := stepsByCall(rec.steps); !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n got %q\nwant %q", got, want)
	}
}
