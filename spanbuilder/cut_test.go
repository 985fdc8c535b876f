package spanbuilder_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/specprobe/specprobe/spanbuilder"
)

// The demo's sites as the loader arms native code.
var nativeSites = []spanbuilder.Site{
	siteDraft:  {Stage: "draft", Native: true},
	siteVerify: {Stage: "verify", Batch: true, Native: true},
	siteAccept: {Stage: "accept", Native: true},
	siteExtend: {Stage: "draft_extend", Batch: true, Native: true},
	siteDraft2: {Stage: "draft", Native: true},
}

// showSteps writes steps one a line: "rid tid: stage start-end [values] [cut=why|!err] ...".
func showSteps(steps []spanbuilder.Step) []string {
	var out []string
	for _, s := range steps {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %d:", s.RequestID, s.TID)
		for _, c := range s.Calls {
			fmt.Fprintf(&b, " %s %d-%d", c.Stage, c.Start.UnixNano()-offset, c.End.UnixNano()-offset)
			for _, v := range c.Values {
				fmt.Fprintf(&b, " %s=%d", v.Name, v.V)
			}
			switch {
			case c.Cut != "":
				b.WriteString(" cut=" + c.Cut)
			case c.Err != "":
				b.WriteString(" !err")
			}
		}
		out = append(out, b.String())
	}
	return out
}

func withDrops(e *spanbuilder.Event, n uint32) *spanbuilder.Event {
	e.Dropped = n
	return e
}

func tentative(e *spanbuilder.Event) *spanbuilder.Event {
	e.Tentative = true
	return e
}

func withDepth(e *spanbuilder.Event, d int, rids ...string) *spanbuilder.Event {
	e.Depth, e.Requests = d, rids
	return e
}

// TestCutCalls: a call whose exit never comes is closed by what proves it
// over, and the steps after it are the target's again, their request sets
// never grown by it.
func TestCutCalls(t *testing.T) {
	pySites := []spanbuilder.Site{{Stage: "verify", Batch: true}}
	const pyVerify = 0
	cases := []struct {
		name  string
		sites []spanbuilder.Site
		evs   []*spanbuilder.Event
		// then runs after the events, before the final Flush.
		then      func(b *spanbuilder.Builder)
		want      []string
		cutMissed uint64
		cutDrop   uint64
		unmatched uint64
		withdrawn uint64
	}{{
		name:  "entered before the exit probe was armed",
		sites: nativeSites,
		evs: []*spanbuilder.Event{
			enter(100, 1, siteDraft, "a"), // its exit is never seen
			enter(110, 1, siteDraft, "b"), exit(120, 1, siteDraft, ""),
			enter(130, 1, siteVerify, ""), exit(160, 1, siteVerify, ""),
			enter(170, 1, siteAccept, "a", "num_correct_drafts", 1), exit(175, 1, siteAccept, ""),
			enter(180, 1, siteAccept, "b", "num_correct_drafts", 2), exit(185, 1, siteAccept, ""),
			enter(190, 1, siteExtend, ""), exit(220, 1, siteExtend, ""),
			// The next step serves c alone.
			enter(300, 1, siteDraft, "c"), exit(310, 1, siteDraft, ""),
			enter(320, 1, siteVerify, ""), exit(350, 1, siteVerify, ""),
			enter(360, 1, siteAccept, "c", "num_correct_drafts", 3), exit(365, 1, siteAccept, ""),
			enter(370, 1, siteExtend, ""), exit(400, 1, siteExtend, ""),
		},
		want: []string{
			"a 1: draft 100-110 cut=exit_missed verify 130-160 num_correct_drafts=1 draft_extend 190-220",
			"b 1: draft 110-120 verify 130-160 num_correct_drafts=2 draft_extend 190-220",
			"c 1: draft 300-310 verify 320-350 num_correct_drafts=3 draft_extend 370-400",
		},
		cutMissed: 1,
	}, {
		name:  "exit without its entry (exit probes armed first)",
		sites: nativeSites,
		evs: []*spanbuilder.Event{
			exit(50, 1, siteDraft, ""), exit(60, 1, siteVerify, ""),
			enter(100, 1, siteDraft, "a"), exit(110, 1, siteDraft, ""),
			enter(120, 1, siteVerify, ""), exit(150, 1, siteVerify, ""),
		},
		want:      []string{"a 1: draft 100-110 verify 120-150"},
		unmatched: 2,
	}, {
		name:  "a drop mid trace",
		sites: nativeSites,
		evs: []*spanbuilder.Event{
			enter(100, 1, siteDraft, "a"), exit(110, 1, siteDraft, ""),
			enter(120, 1, siteVerify, ""), exit(150, 1, siteVerify, ""),
			enter(160, 1, siteAccept, "a", "num_correct_drafts", 1), exit(165, 1, siteAccept, ""),
			enter(170, 1, siteExtend, ""), exit(200, 1, siteExtend, ""),
			enter(300, 1, siteDraft, "a"),
			// Lost: the draft's exit, the verify's entry and exit.
			withDrops(enter(360, 1, siteAccept, "a", "num_correct_drafts", 2), 3), exit(365, 1, siteAccept, ""),
			enter(370, 1, siteExtend, ""), exit(400, 1, siteExtend, ""),
			enter(500, 1, siteDraft, "b"), exit(510, 1, siteDraft, ""),
			enter(520, 1, siteVerify, ""), exit(550, 1, siteVerify, ""),
			enter(560, 1, siteAccept, "b", "num_correct_drafts", 3), exit(565, 1, siteAccept, ""),
			enter(570, 1, siteExtend, ""), exit(600, 1, siteExtend, ""),
		},
		want: []string{
			"a 1: draft 100-110 verify 120-150 num_correct_drafts=1 draft_extend 170-200",
			"a 1: draft 300-360 cut=events_dropped",
			"a 1: draft_extend 370-400",
			"b 1: draft 500-510 verify 520-550 num_correct_drafts=3 draft_extend 570-600",
		},
		cutDrop: 1,
	}, {
		name:  "a drop that took an entry: its exit is unmatched",
		sites: nativeSites,
		evs: []*spanbuilder.Event{
			withDrops(exit(110, 1, siteDraft, ""), 1),
			enter(120, 1, siteVerify, ""), exit(150, 1, siteVerify, ""),
			enter(160, 1, siteAccept, "a", "num_correct_drafts", 1), exit(165, 1, siteAccept, ""),
		},
		want:      []string{"a 1: verify 120-150 num_correct_drafts=1"},
		unmatched: 1,
	}, {
		name:  "a thread that dies mid-stage after a lost exit",
		sites: nativeSites,
		evs: []*spanbuilder.Event{
			enter(50, 2, siteDraft, "a"), exit(60, 2, siteDraft, ""),
			enter(100, 2, siteVerify, ""), // exit lost
			enter(200, 2, siteDraft, "a"), // the next step: the verify is over
		},
		then: func(b *spanbuilder.Builder) { b.ThreadGone(2, 250, "thread exited during the stage") },
		want: []string{
			"a 2: draft 50-60 verify 100-200 cut=exit_missed",
			"a 2: draft 200-250 !err",
		},
		cutMissed: 1,
	}, {
		name:  "the calls a lost exit took for its own end its step",
		sites: nativeSites,
		evs: []*spanbuilder.Event{
			enter(100, 1, siteDraft, "a"), exit(110, 1, siteDraft, ""),
			enter(120, 1, siteDraft, "b"), // its exit is never seen
			enter(130, 1, siteVerify, ""), exit(160, 1, siteVerify, ""),
			enter(170, 1, siteAccept, "a", "num_correct_drafts", 1), exit(175, 1, siteAccept, ""),
			enter(180, 1, siteAccept, "b", "num_correct_drafts", 2), exit(185, 1, siteAccept, ""),
			enter(190, 1, siteExtend, ""), exit(220, 1, siteExtend, ""),
			enter(300, 1, siteDraft, "c"), exit(310, 1, siteDraft, ""),
			enter(320, 1, siteVerify, ""), exit(350, 1, siteVerify, ""),
			enter(360, 1, siteAccept, "c", "num_correct_drafts", 3), exit(365, 1, siteAccept, ""),
			enter(370, 1, siteExtend, ""), exit(400, 1, siteExtend, ""),
		},
		want: []string{
			"a 1: draft 100-110 verify 130-160 num_correct_drafts=1 draft_extend 190-220",
			"b 1: draft 120-300 cut=exit_missed verify 130-160 num_correct_drafts=2 draft_extend 190-220",
			"c 1: draft 300-310 verify 320-350 num_correct_drafts=3 draft_extend 370-400",
		},
		cutMissed: 1,
	}, {
		name:  "a native verify that calls the accept is no lost exit",
		sites: nativeSites,
		evs: []*spanbuilder.Event{
			enter(100, 1, siteDraft, "r"), exit(110, 1, siteDraft, ""),
			enter(200, 1, siteVerify, ""),
			enter(210, 1, siteAccept, "r", "num_correct_drafts", 2), exit(220, 1, siteAccept, ""),
			exit(300, 1, siteVerify, ""),
		},
		want: []string{"r 1: draft 100-110 verify 200-300 num_correct_drafts=2"},
	}, {
		name:  "Python: a pop whose frames say an older call is gone",
		sites: pySites,
		evs: []*spanbuilder.Event{
			enter(100, 3, pyVerify, ""), // its pop is lost
			enter(200, 3, pyVerify, ""), withDepth(exit(250, 3, pyVerify, ""), 1, "b"),
			enter(300, 3, pyVerify, ""), withDepth(exit(350, 3, pyVerify, ""), 1, "c"),
		},
		want:      []string{"b 3: verify 200-250", "c 3: verify 300-350"},
		cutMissed: 1,
	}, {
		name:  "Python: a tentative entry the frames prove no call is withdrawn, not cut",
		sites: pySites,
		evs: []*spanbuilder.Event{
			tentative(enter(100, 3, pyVerify, "")), // a reference held by a frame kept past its call
			tentative(enter(200, 3, pyVerify, "")), withDepth(exit(250, 3, pyVerify, ""), 1, "b"),
		},
		want:      []string{"b 3: verify 200-250"},
		withdrawn: 1,
	}, {
		name:  "Python: a recursive call's pop is no cut",
		sites: pySites,
		evs: []*spanbuilder.Event{
			enter(100, 3, pyVerify, ""),
			enter(200, 3, pyVerify, ""), withDepth(exit(250, 3, pyVerify, ""), 2, "b"),
			withDepth(exit(350, 3, pyVerify, ""), 1, "b"),
		},
		want: []string{"b 3: verify 100-350 verify 200-250"},
	}, {
		name:  "a thread gone quiet: cut by age",
		sites: nativeSites,
		evs:   []*spanbuilder.Event{enter(0, 4, siteDraft, "a")},
		then: func(b *spanbuilder.Builder) {
			b.Expire(uint64(29 * time.Second))
			add(b, enter(uint64(30*time.Second), 5, siteDraft, "x")) // another thread, young
			b.Expire(uint64(31 * time.Second))
			add(b, exit(uint64(31*time.Second)+10, 5, siteDraft, ""))
		},
		want: []string{
			fmt.Sprintf("a 4: draft 0-%d cut=exit_missed", 31*time.Second),
			fmt.Sprintf("x 5: draft %d-%d", 30*time.Second, 31*time.Second+10),
		},
		cutMissed: 1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			b := spanbuilder.New(tc.sites, spanbuilder.Clock{OffsetNs: offset}, rec)
			add(b, tc.evs...)
			if tc.then != nil {
				tc.then(b)
			}
			b.Flush(1_000_000_000_000, "end")
			if got := showSteps(rec.steps); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			st := b.Stats
			if st.CutExitMissed != tc.cutMissed || st.CutDropped != tc.cutDrop || st.UnmatchedExits != tc.unmatched || st.Withdrawn != tc.withdrawn {
				t.Errorf("cut by a missed exit %d, by drops %d, unmatched exits %d, withdrawn %d; want %d, %d, %d, %d",
					st.CutExitMissed, st.CutDropped, st.UnmatchedExits, st.Withdrawn, tc.cutMissed, tc.cutDrop, tc.unmatched, tc.withdrawn)
			}
		})
	}
}

func TestDropsCountedPerThread(t *testing.T) {
	b, _ := newBuilder()
	add(b, withDrops(enter(100, 7, siteDraft, "a"), 3), withDrops(enter(200, 7, siteDraft, "a"), 2),
		withDrops(enter(300, 8, siteDraft, "b"), 1))
	if want := map[uint32]uint64{7: 5, 8: 1}; !reflect.DeepEqual(b.Stats.DroppedByThread, want) {
		t.Errorf("DroppedByThread = %v, want %v", b.Stats.DroppedByThread, want)
	}
}

// A stage whose calls are slow gets ten times their 99th percentile before
// an open call of it is cut, not the 30 s floor.
func TestExpireFollowsSlowStages(t *testing.T) {
	b, _ := newBuilder()
	const s = uint64(time.Second)
	at := uint64(0)
	for i := 0; i < 10; i++ { // verifies of 5 s: the bound is 50 s
		add(b, enter(at, 1, siteVerify, ""), exit(at+5*s, 1, siteVerify, ""))
		at += 6 * s
	}
	add(b, enter(at, 1, siteVerify, ""))
	b.Expire(at + 40*s)
	if b.Stats.CutExitMissed != 0 {
		t.Fatalf("a verify open 40 s cut though its stage's calls take 5 s")
	}
	b.Expire(at + 51*s)
	if b.Stats.CutExitMissed != 1 || len(b.OpenThreads(pid)) != 0 {
		t.Errorf("a verify open 51 s: %d cut, threads open %v; want it cut", b.Stats.CutExitMissed, b.OpenThreads(pid))
	}
}
