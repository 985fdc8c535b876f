package spanbuilder

import (
	"slices"
	"time"

	"github.com/specprobe/specprobe/spanschema"
)

// Closing calls whose exit never comes. An exit is lost when specprobe
// attached while the call ran, or when the kernel dropped it (ring buffer
// full). Left open, such a call keeps its thread's step from ever closing,
// and every later batch call of the thread is taken for every request the
// step collected. So a call is cut, with an error status and the reason in
// Call.Cut, as soon as something proves it over:
//   - an entry on its thread, while it is open, of its own native function
//     (never recursive) or of a native stage earlier in the step (native
//     code never runs one inside a later stage's call; Site.Native);
//   - a Python pop whose frame count (Event.Depth) says the thread runs
//     fewer calls of the site than the builder holds open (one whose entry
//     was tentative is withdrawn instead: no pop ever made it a call);
//   - the kernel losing events of its thread (Event.Dropped): every call
//     the thread has open is cut and its step ends there;
//   - its age (Expire), for a thread that went quiet;
//   - its thread or process exiting (ThreadGone, Flush), as before.
// Spans after a cut follow the target again from the thread's next step.

// Values of Call.Cut, exported as the span attribute specprobe.cut.
const (
	CutExitMissed = "exit_missed"    // proved over by what its thread did next, or by its age
	CutDropped    = "events_dropped" // its thread's events were lost in the kernel
)

// Bounds on the age of an open call (Expire): ten times the 99th
// percentile of the stage's completed calls, and never under a floor far
// above any decode stage (milliseconds to a few hundred) yet above a
// first call's warm-up (compiling or capturing CUDA graphs).
const (
	ageFloor   = 30 * time.Second
	ageOverP99 = 10
)

// cutNative cuts, at an entry of the native site, the open native call it
// proves over (one of the same site, or of a later stage) and the calls
// above it. Where that was the thread's top-level call, the calls that
// finished while it was open were taken for calls inside it; the step goes
// on from the latest of them, so the entry is judged as the next top-level
// call after it (a new step when it goes back to an earlier stage).
func (b *Builder) cutNative(tid uint32, t *thread, site int, at uint64) {
	stage := b.sites[site].Stage
	i := slices.IndexFunc(t.open, func(oc openCall) bool {
		s := b.sites[oc.site]
		return s.Native && (oc.site == site || spanschema.NewStep(s.Stage, stage))
	})
	if i < 0 {
		return
	}
	for j := len(t.open) - 1; j >= i; j-- {
		b.cut(tid, t, t.open[j], at, CutExitMissed, "stage exit was not seen: the thread entered a stage again")
	}
	t.open = t.open[:i]
	if i > 0 || t.topStart >= len(t.step) {
		return
	}
	latest := &t.step[t.topStart]
	for k := range t.step[t.topStart:] {
		if c := &t.step[t.topStart+k]; c.Start.After(latest.Start) {
			latest = c
		}
	}
	t.last, t.raised = latest.Stage, latest.Err != "" && latest.Cut == ""
}

// cutDeeper cuts, at an exit of site with depth calls of it running, the
// oldest of the site's open calls beyond depth; a tentative one is
// withdrawn instead. Which ones lost their exit cannot be told from the
// events (a recursive call's lost exit looks the
// same); the oldest are taken, the case of a stage called once a step.
func (b *Builder) cutDeeper(tid uint32, t *thread, site, depth int, at uint64) {
	n := 0
	for _, oc := range t.open {
		if oc.site == site {
			n++
		}
	}
	for j := 0; j < len(t.open) && n > depth; {
		if t.open[j].site != site {
			j++
			continue
		}
		oc := t.open[j]
		if oc.tentative {
			// No exit ever made it a call: a reference to the code taken
			// and held past a call (by a frame that outlived its own),
			// not a push.
			t.open = slices.Delete(t.open, j, j+1)
			b.Stats.Withdrawn++
			n--
			continue
		}
		if oc.requests == nil && b.sites[site].Batch {
			// A Python stage reads its requests at its pop, which never
			// came: it serves none known, not the step's.
			oc.requests = []string{}
		}
		b.cut(tid, t, oc, at, CutExitMissed, "stage exit was not seen: the call's frame is gone")
		t.open = slices.Delete(t.open, j, j+1)
		n--
	}
}

// dropped ends what the thread had open and its step: the kernel lost n of
// its events just before at, and which calls they began or ended is not known.
func (b *Builder) dropped(tid uint32, t *thread, at uint64, n uint32) {
	if b.Stats.DroppedByThread == nil {
		b.Stats.DroppedByThread = map[uint32]uint64{}
	}
	b.Stats.DroppedByThread[tid] += uint64(n)
	for j := len(t.open) - 1; j >= 0; j-- {
		b.cut(tid, t, t.open[j], at, CutDropped, "events of this thread were lost in the kernel (ring buffer full)")
	}
	t.open = t.open[:0]
	b.endStep(tid, t)
	t.endStream()
}

// endStep hands on the thread's step and starts the next one afresh.
func (b *Builder) endStep(tid uint32, t *thread) {
	b.flushStep(tid, t)
	t.prev, t.first, t.topStart, t.raised = "", "", 0, false
}

// Expire cuts the calls open longer than their stage's bound at boot time
// now (a thread gone quiet after losing an exit), and ends the step of a
// thread left with none open.
func (b *Builder) Expire(now uint64) {
	for _, tid := range b.sortedThreads() {
		t := b.threads[tid]
		n := len(t.open)
		for j := len(t.open) - 1; j >= 0; j-- {
			oc := t.open[j]
			if now <= oc.start || time.Duration(now-oc.start) <= ageFloor || time.Duration(now-oc.start) <= b.maxAge(b.sites[oc.site].Stage) {
				continue
			}
			b.cut(tid, t, oc, now, CutExitMissed, "stage exit was not seen: open longer than any call of its stage")
			t.open = slices.Delete(t.open, j, j+1)
		}
		if n > 0 && len(t.open) == 0 || b.stepIdle(t, now) {
			b.endStep(tid, t)
		}
	}
}

// maxAge is how long a call of stage may stay open.
func (b *Builder) maxAge(stage string) time.Duration {
	if p, ok := b.Stats.Percentile(stage, 99); ok && p*ageOverP99 > ageFloor {
		return p * ageOverP99
	}
	return ageFloor
}

func (b *Builder) sortedThreads() []uint32 {
	tids := make([]uint32, 0, len(b.threads))
	for tid := range b.threads {
		tids = append(tids, tid)
	}
	slices.Sort(tids)
	return tids
}
