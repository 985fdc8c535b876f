package spanbuilder_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/specprobe/specprobe/spanbuilder"
)

// A one-stream engine's sites: a native draft and verify that name no
// request, and a native request boundary; then the same in Python, where
// the boundary (generate()) is called again inside the draft.
const (
	oneDraft = iota
	oneVerify
	oneBound
)

var (
	oneStreamSites = []spanbuilder.Site{
		oneDraft:  {Stage: "draft", Batch: true, Native: true},
		oneVerify: {Stage: "verify", Batch: true, Native: true},
		oneBound:  {Stage: "request_boundary", Batch: true, Native: true, Boundary: "run_request"},
	}
	pyStreamSites = []spanbuilder.Site{
		oneDraft:  {Stage: "draft", Batch: true},
		oneVerify: {Stage: "verify", Batch: true},
		oneBound:  {Stage: "request_boundary", Batch: true, Boundary: "GenerationMixin.generate"},
	}
)

// step is a draft then a verify with its count, on tid, from at.
func step(at uint64, tid uint32, correct int) []*spanbuilder.Event {
	return []*spanbuilder.Event{
		enter(at, tid, oneDraft, ""), exit(at+10, tid, oneDraft, ""),
		enter(at+20, tid, oneVerify, ""), exit(at+30, tid, oneVerify, "", "num_correct_drafts", correct),
	}
}

func cancel(ns uint64, tid uint32, site int) *spanbuilder.Event {
	e := enter(ns, tid, site, "")
	e.Cancel = true
	return e
}

// events joins events and steps in order.
func events(parts ...any) []*spanbuilder.Event {
	var out []*spanbuilder.Event
	for _, p := range parts {
		switch p := p.(type) {
		case *spanbuilder.Event:
			out = append(out, p)
		case []*spanbuilder.Event:
			out = append(out, p...)
		}
	}
	return out
}

// TestStreams: in a spec whose stages name no request, a step serves its
// thread's stream request, or the request of the boundary call it runs in.
func TestStreams(t *testing.T) {
	const s = uint64(time.Second)
	cases := []struct {
		name      string
		sites     []spanbuilder.Site
		noStreams bool
		evs       []*spanbuilder.Event
		want      []string
		cut       uint64
		unmatched uint64
		withdrawn uint64
	}{{
		name:  "one thread's steps are one request",
		sites: oneStreamSites,
		evs:   events(step(100, 1, 2), step(200, 1, 0), step(300, 1, 3)),
		want: []string{
			"thread-1-1 1: draft 100-110 verify 120-130 num_correct_drafts=2",
			"thread-1-1 1: draft 200-210 verify 220-230 num_correct_drafts=0",
			"thread-1-1 1: draft 300-310 verify 320-330 num_correct_drafts=3",
		},
	}, {
		name:  "each thread its own stream",
		sites: oneStreamSites,
		evs:   events(step(100, 1, 1), step(105, 2, 2), step(200, 1, 3)),
		want: []string{
			"thread-1-1 1: draft 100-110 verify 120-130 num_correct_drafts=1",
			"thread-1-1 1: draft 200-210 verify 220-230 num_correct_drafts=3",
			"thread-2-1 2: draft 105-115 verify 125-135 num_correct_drafts=2", // handed on at the end
		},
	}, {
		name:  "a stream idle longer than StreamIdle begins its next request",
		sites: oneStreamSites,
		evs:   events(step(100, 1, 1), step(200, 1, 1), step(200+3*s, 1, 1), step(200+4*s, 1, 1)),
		want: []string{
			"thread-1-1 1: draft 100-110 verify 120-130 num_correct_drafts=1",
			"thread-1-1 1: draft 200-210 verify 220-230 num_correct_drafts=1",
			"thread-1-2 1: draft 3000000200-3000000210 verify 3000000220-3000000230 num_correct_drafts=1",
			"thread-1-2 1: draft 4000000200-4000000210 verify 4000000220-4000000230 num_correct_drafts=1",
		},
	}, {
		name:  "a request per boundary call, the stream between them",
		sites: oneStreamSites,
		evs: events(
			step(50, 1, 4),
			enter(100, 1, oneBound, ""), step(110, 1, 1), step(150, 1, 2), exit(190, 1, oneBound, ""),
			enter(200, 1, oneBound, ""), step(210, 1, 3), exit(250, 1, oneBound, ""),
			step(300, 1, 5),
		),
		want: []string{
			"thread-1-1 1: draft 50-60 verify 70-80 num_correct_drafts=4",
			"run_request-1-2 1: draft 110-120 verify 130-140 num_correct_drafts=1",
			"run_request-1-2 1: draft 150-160 verify 170-180 num_correct_drafts=2",
			"run_request-1-3 1: draft 210-220 verify 230-240 num_correct_drafts=3",
			"thread-1-4 1: draft 300-310 verify 320-330 num_correct_drafts=5",
		},
	}, {
		name:  "a boundary call idle past StreamIdle stays one request",
		sites: oneStreamSites,
		evs:   events(enter(100, 1, oneBound, ""), step(110, 1, 1), step(5*s, 1, 2), exit(6*s, 1, oneBound, "")),
		want: []string{
			"run_request-1-1 1: draft 110-120 verify 130-140 num_correct_drafts=1",
			"run_request-1-1 1: draft 5000000000-5000000010 verify 5000000020-5000000030 num_correct_drafts=2",
		},
	}, {
		name:  "Python: generate() called inside the draft is part of the request",
		sites: pyStreamSites,
		evs: events(
			enter(100, 1, oneBound, ""),
			enter(110, 1, oneDraft, ""), enter(112, 1, oneBound, ""), withDepth(exit(118, 1, oneBound, ""), 2), exit(120, 1, oneDraft, ""),
			enter(130, 1, oneVerify, ""), exit(140, 1, oneVerify, ""),
			enter(150, 1, oneDraft, ""), enter(152, 1, oneBound, ""), withDepth(exit(158, 1, oneBound, ""), 2), exit(160, 1, oneDraft, ""),
			enter(170, 1, oneVerify, ""), exit(180, 1, oneVerify, ""),
			withDepth(exit(190, 1, oneBound, ""), 1),
		),
		want: []string{
			"GenerationMixin.generate-1-1 1: draft 110-120 verify 130-140",
			"GenerationMixin.generate-1-1 1: draft 150-160 verify 170-180",
		},
	}, {
		name:  "Python: the assistant's forward inside the draft is no verify",
		sites: pyStreamSites,
		evs: events(
			enter(100, 1, oneBound, ""),
			enter(110, 1, oneDraft, ""), enter(112, 1, oneBound, ""),
			enter(113, 1, oneVerify, ""), withDepth(exit(114, 1, oneVerify, ""), 1),
			enter(115, 1, oneVerify, ""), withDepth(exit(116, 1, oneVerify, ""), 1),
			withDepth(exit(118, 1, oneBound, ""), 2), exit(120, 1, oneDraft, ""),
			enter(130, 1, oneVerify, ""), withDepth(exit(140, 1, oneVerify, ""), 1),
			withDepth(exit(190, 1, oneBound, ""), 1),
		),
		want: []string{"GenerationMixin.generate-1-1 1: draft 110-120 verify 130-140"},
	}, {
		name:  "Python: a pop whose frames say the outer call is gone ends its request",
		sites: pyStreamSites,
		evs: events(
			enter(100, 1, oneBound, ""), step(110, 1, 1), // its pop is lost
			enter(200, 1, oneBound, ""), step(210, 1, 2), withDepth(exit(250, 1, oneBound, ""), 1),
			step(300, 1, 3),
		),
		want: []string{
			"GenerationMixin.generate-1-1 1: draft 110-120 verify 130-140 num_correct_drafts=1",
			"GenerationMixin.generate-1-1 1: draft 210-220 verify 230-240 num_correct_drafts=2",
			"thread-1-2 1: draft 300-310 verify 320-330 num_correct_drafts=3",
		},
	}, {
		name:      "a withdrawn boundary entry opens nothing",
		sites:     pyStreamSites,
		evs:       events(enter(100, 1, oneBound, ""), cancel(101, 1, oneBound), step(110, 1, 1)),
		want:      []string{"thread-1-1 1: draft 110-120 verify 130-140 num_correct_drafts=1"},
		withdrawn: 1,
	}, {
		name:  "the boundary's return cuts a stage call whose exit was lost",
		sites: oneStreamSites,
		evs: events(
			enter(100, 1, oneBound, ""), enter(110, 1, oneDraft, ""), exit(120, 1, oneDraft, ""),
			enter(130, 1, oneVerify, ""), // its exit is lost
			exit(190, 1, oneBound, ""), step(200, 1, 1),
		),
		want: []string{
			"run_request-1-1 1: draft 110-120 verify 130-190 cut=exit_missed",
			"thread-1-2 1: draft 200-210 verify 220-230 num_correct_drafts=1",
		},
		cut: 1,
	}, {
		name:  "a boundary call begun before attach ends the stream's request",
		sites: oneStreamSites,
		evs:   events(step(100, 1, 1), exit(150, 1, oneBound, ""), step(200, 1, 2)),
		want: []string{
			"thread-1-1 1: draft 100-110 verify 120-130 num_correct_drafts=1",
			"thread-1-2 1: draft 200-210 verify 220-230 num_correct_drafts=2",
		},
		unmatched: 1,
	}, {
		name:  "lost events end the request",
		sites: oneStreamSites,
		evs: events(
			enter(100, 1, oneBound, ""), step(110, 1, 1),
			withDrops(enter(200, 1, oneDraft, ""), 2), exit(210, 1, oneDraft, ""),
			enter(220, 1, oneVerify, ""), exit(230, 1, oneVerify, "", "num_correct_drafts", 2),
			exit(290, 1, oneBound, ""),
			enter(300, 1, oneBound, ""), step(310, 1, 3), exit(390, 1, oneBound, ""),
		),
		want: []string{
			"run_request-1-1 1: draft 110-120 verify 130-140 num_correct_drafts=1",
			"thread-1-2 1: draft 200-210 verify 220-230 num_correct_drafts=2",
			"run_request-1-3 1: draft 310-320 verify 330-340 num_correct_drafts=3",
		},
		unmatched: 1,
	}, {
		name:      "a spec that names requests: a step naming none serves none",
		sites:     oneStreamSites,
		noStreams: true,
		evs:       events(enter(100, 1, oneBound, ""), step(110, 1, 1), exit(190, 1, oneBound, "")),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			b := spanbuilder.New(tc.sites, spanbuilder.Clock{OffsetNs: offset}, rec)
			b.Streams, b.StreamIdle = !tc.noStreams, 2*time.Second
			add(b, tc.evs...)
			b.Flush(1_000_000_000_000, "end")
			if got := showSteps(rec.steps); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			st := b.Stats
			if st.CutExitMissed != tc.cut || st.UnmatchedExits != tc.unmatched || st.Withdrawn != tc.withdrawn {
				t.Errorf("cut %d, unmatched exits %d, withdrawn %d; want %d, %d, %d",
					st.CutExitMissed, st.UnmatchedExits, st.Withdrawn, tc.cut, tc.unmatched, tc.withdrawn)
			}
			if tc.noStreams && st.UnattributedSteps != st.Steps {
				t.Errorf("%d of %d steps unattributed, want all", st.UnattributedSteps, st.Steps)
			}
		})
	}
}

// TestStreamStepIdle: a stream thread's step is handed on once it has been
// idle half of StreamIdle, before the sink would end its request.
func TestStreamStepIdle(t *testing.T) {
	for _, streams := range []bool{true, false} {
		rec := &recorder{}
		b := spanbuilder.New(oneStreamSites, spanbuilder.Clock{OffsetNs: offset}, rec)
		b.Streams, b.StreamIdle = streams, 2*time.Second
		add(b, step(100, 1, 1)...)
		b.Expire(130 + uint64(time.Second))
		if len(rec.steps) != 0 {
			t.Fatalf("streams %v: a step idle 1 s handed on", streams)
		}
		b.Expire(131 + uint64(time.Second))
		if want := map[bool]int{true: 1, false: 0}[streams]; len(rec.steps) != want {
			t.Errorf("streams %v: %d steps handed on after 1 s and 1 ns idle, want %d", streams, len(rec.steps), want)
		}
	}
}
