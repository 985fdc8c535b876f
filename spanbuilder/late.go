package spanbuilder

import (
	"math"
	"slices"
	"time"

	"github.com/specprobe/specprobe/spanschema"
)

// LateAccept holds the steps of a verify until the accepted counts of its
// requests arrive, for engines that resolve acceptance on the host after
// the next step has already run (SGLang's overlap scheduler). Which verify
// a count belongs to is decided by the CountMatcher; LateAccept only puts
// the counts on the spans and lets them go.
type LateAccept struct {
	next    Sink
	waiting map[VerifyKey]*lateVerify
	// Steps whose counts have not come this long after their verify, in
	// the target's time, go on without them.
	GiveUpAfter time.Duration
	Matched     uint64 // verifies that got their count
	Unmatched   uint64 // verifies that went on without one
	Drafts      int64  // sum of the counts matched: drafts accepted
	GaveUp      uint64 // verifies let go by Expire: their counts had not come
}

// VerifyKey names one verify call: its thread and when it returned.
type VerifyKey struct {
	TID uint32
	End uint64 // boot ns of its exit
}

type lateVerify struct {
	held   []Step
	counts map[string]int64
	closed bool // every count that will come has come
	steps  int  // steps still expected (one per request)
}

// DefaultGiveUpAfter is LateAccept's GiveUpAfter: far past the time an
// engine takes from a verify to reading its counts (SGLang's overlap: the
// next step's verify; vLLM: the scheduler's update after the step).
const DefaultGiveUpAfter = 2 * time.Second

// NewLateAccept returns a LateAccept in front of next.
func NewLateAccept(next Sink) *LateAccept {
	return &LateAccept{next: next, waiting: map[VerifyKey]*lateVerify{}, GiveUpAfter: DefaultGiveUpAfter}
}

// Expect says the verify key, serving n requests, will get counts: its
// steps wait for them.
func (l *LateAccept) Expect(key VerifyKey, n int) {
	l.waiting[key] = &lateVerify{counts: map[string]int64{}, steps: n}
}

// noCount stands in a request's counts for a verify without drafts.
const noCount = math.MinInt64

// Count records a request's accepted count on the verify key; NoCount
// says the verify checked no draft of it (a prefill in vLLM's batch).
func (l *LateAccept) Count(key VerifyKey, rid string, n int64) {
	if v := l.waiting[key]; v != nil && !v.closed {
		v.counts[rid] = n
	}
}

// NoCount records that rid's verify key checked no draft.
func (l *LateAccept) NoCount(key VerifyKey, rid string) { l.Count(key, rid, noCount) }

// Close says every count of key has come (or none will): its steps go on.
func (l *LateAccept) Close(key VerifyKey) {
	v := l.waiting[key]
	if v == nil {
		return
	}
	v.closed = true
	for _, s := range v.held {
		l.release(v, s)
	}
	v.held = nil
	l.done(key, v)
}

// Step implements Sink.
func (l *LateAccept) Step(s Step) {
	i := lastVerify(s.Calls)
	if i < 0 {
		l.next.Step(s)
		return
	}
	key := VerifyKey{TID: s.Calls[i].TID, End: s.Calls[i].EndBoot}
	v := l.waiting[key]
	switch {
	case v == nil:
		l.Unmatched++ // no count will come for it
		l.next.Step(s)
	case v.closed:
		l.release(v, s)
		l.done(key, v)
	default:
		v.held = append(v.held, s)
	}
}

// release hands s on with its request's count, if one came.
func (l *LateAccept) release(v *lateVerify, s Step) {
	v.steps--
	n, ok := v.counts[s.RequestID]
	switch {
	case !ok:
		l.Unmatched++
	case n == noCount:
	default:
		c := &s.Calls[lastVerify(s.Calls)]
		c.Values = append(slices.Clone(c.Values), Value{Name: spanschema.ValueCorrect, V: n})
		l.Drafts += n
		l.Matched++
	}
	l.next.Step(s)
}

func (l *LateAccept) done(key VerifyKey, v *lateVerify) {
	if v.closed && v.steps <= 0 {
		delete(l.waiting, key)
	}
}

// lastVerify is the step's verify: the last that did not raise (a verify
// that raised produced no tokens; the retry in the same step is the one).
func lastVerify(calls []Call) int {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Stage == spanschema.Verify && calls[i].Err == "" {
			return i
		}
	}
	return -1
}

// Expire lets go of the verifies that ended GiveUpAfter or more before
// readTo: the boot time up to which the events of every process whose
// reads of counts could be for them have been read. Measured on the
// target's clock, not on the time specprobe handled the verify, so a reader
// that falls behind (one process's ring buffer read later than another's,
// specprobe starved of CPU) does not make counts look late that are only
// still unread.
func (l *LateAccept) Expire(readTo uint64) {
	for key := range l.waiting {
		if readTo >= key.End && readTo-key.End >= uint64(l.GiveUpAfter) {
			l.GaveUp++
			l.Close(key)
			delete(l.waiting, key)
		}
	}
}

// CloseAll lets everything go (the session ends).
func (l *LateAccept) CloseAll() {
	for key := range l.waiting {
		l.Close(key)
		delete(l.waiting, key)
	}
}
