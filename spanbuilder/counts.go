package spanbuilder

import "slices"

// CountMatcher decides which verify each accepted-count read belongs to.
//
// An engine resolves the steps of a thread in the order it ran them: the
// k-th read of counts after attach is for the k-th traced verify, or for
// the (k-1)-th when one verify ran before attach whose counts came after.
// Which of the two holds is decided as the reads arrive, and a read is
// matched only once it is:
//   - a read that comes before the verify it would be for has run rules its
//     hypothesis out; so does one coming later than MaxLag verifies after it
//     (SGLang's overlap scheduler resolves a step after the next one's
//     verify, no later);
//   - a read whose requests differ from its verify's rules it out.
//
// A verify whose requests could not be read still keeps its place, so a
// lost read never shifts the counts after it. When both hypotheses fail
// (a verify the ring buffer lost), matching starts over.
type CountMatcher struct {
	late    *LateAccept
	threads map[uint32]*countThread
	// MaxLag is how many verifies of the thread may run between a verify
	// and the read of its counts.
	MaxLag int
	// MaxUndecided bounds the reads held while undecided: past it their
	// verifies go on without counts.
	MaxUndecided int
	Reset        uint64 // times matching started over
	// Stream names the order a thread's verifies and reads are in: the
	// thread itself (the default), or, where a server's verifies run in
	// one process and its counts are read in another (vLLM with TP > 1),
	// one stream for both.
	Stream func(tid uint32) uint32
}

type countThread struct {
	verifies []countVerify // traced, not yet matched; oldest first
	traced   int           // verifies traced since matching (re)started
	reads    []countRead   // reads held while undecided
	nread    int           // reads since matching (re)started
	ahead    int           // decided: reads before the first traced verify's (0 or 1); -1 undecided
	alive    [2]bool       // undecided: which values of ahead still fit
}

type countVerify struct {
	key  VerifyKey
	rids []string // nil: unknown
	n    int      // its number among the traced verifies, from 1
}

type countRead struct {
	rids    []string
	counts  []int64
	after   int  // verifies traced when it came
	unknown bool // a read that failed: it keeps its place, fits any verify, gives no count
}

// NewCountMatcher returns a matcher handing its decisions to late.
func NewCountMatcher(late *LateAccept) *CountMatcher {
	return &CountMatcher{late: late, threads: map[uint32]*countThread{}, MaxLag: 1, MaxUndecided: 16}
}

func (m *CountMatcher) stream(tid uint32) uint32 {
	if m.Stream != nil {
		return m.Stream(tid)
	}
	return tid
}

func (m *CountMatcher) thread(tid uint32) *countThread {
	id := m.stream(tid)
	t := m.threads[id]
	if t == nil {
		t = &countThread{ahead: -1, alive: [2]bool{true, true}}
		m.threads[id] = t
	}
	return t
}

// Verify records a verify that will get counts; rids nil when its requests
// are unknown.
func (m *CountMatcher) Verify(key VerifyKey, rids []string) {
	m.late.Expect(key, len(rids))
	m.Traced(key, rids)
}

// Traced is Verify for a caller that told LateAccept to expect the counts
// already: its steps are held from the verify's end, while its place among
// the reads is decided once the reads before it have come.
func (m *CountMatcher) Traced(key VerifyKey, rids []string) {
	t := m.thread(key.TID)
	t.traced++
	t.verifies = append(t.verifies, countVerify{key: key, rids: rids, n: t.traced})
}

// Counts records a read of counts on thread tid: each request's count,
// index-aligned with rids (NoDrafts for one whose verify checked none).
func (m *CountMatcher) Counts(tid uint32, rids []string, counts []int64) {
	m.read(tid, countRead{rids: rids, counts: counts})
}

// Unreadable records a read of counts on thread tid that failed: it was
// for some verify, which gets no count, and the ones after keep theirs.
func (m *CountMatcher) Unreadable(tid uint32) {
	m.read(tid, countRead{unknown: true})
}

func (m *CountMatcher) read(tid uint32, r countRead) {
	t := m.thread(tid)
	t.nread++
	r.after = t.traced
	if t.ahead >= 0 {
		if !m.fits(t, t.nread, r, t.ahead) {
			m.restart(t)
			return
		}
		m.apply(t, t.nread, r)
		return
	}
	t.reads = append(t.reads, r)
	first := t.nread - len(t.reads) + 1
	for ahead := range 2 {
		if t.alive[ahead] && !m.fits(t, t.nread, r, ahead) {
			t.alive[ahead] = false
		}
	}
	switch {
	case !t.alive[0] && !t.alive[1]:
		m.restart(t)
	case t.alive[0] != t.alive[1]:
		t.ahead = 0
		if t.alive[1] {
			t.ahead = 1
		}
		for i, r := range t.reads {
			m.apply(t, first+i, r)
		}
		t.reads = nil
	case len(t.reads) > m.MaxUndecided:
		// Both still fit (the same batch step after step): the oldest
		// verify cannot wait longer.
		m.drop(t, 1)
		t.reads = t.reads[1:]
	}
}

// NoDrafts is the count of a request whose verify checked no draft.
const NoDrafts = noCount

// fits tells whether read number k (since matching started) can be for
// traced verify k-ahead.
func (m *CountMatcher) fits(t *countThread, k int, r countRead, ahead int) bool {
	n := k - ahead
	if n == 0 {
		return ahead == 1 // the verify that ran before attach
	}
	if n < 1 || n > r.after || r.after-n > m.MaxLag {
		return false
	}
	v, ok := t.find(n)
	if !ok {
		return true // matched already (or given up on): nothing to contradict
	}
	return r.unknown || v.rids == nil || sameRequests(v.rids, r.rids)
}

// sameRequests tells whether two reads name the same requests, in any order:
// the verify and the read of its counts may list a batch differently (vLLM's
// scheduler keeps arrival order, its runner its own batch order).
func sameRequests(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if slices.Equal(a, b) {
		return true
	}
	seen := make(map[string]int, len(a))
	for _, r := range a {
		seen[r]++
	}
	for _, r := range b {
		if seen[r]--; seen[r] < 0 {
			return false
		}
	}
	return true
}

func (t *countThread) find(n int) (countVerify, bool) {
	for _, v := range t.verifies {
		if v.n == n {
			return v, true
		}
	}
	return countVerify{}, false
}

// apply puts read number k on its verify.
func (m *CountMatcher) apply(t *countThread, k int, r countRead) {
	n := k - t.ahead
	if n < 1 {
		return // for the verify before attach
	}
	m.drop(t, n-1) // older verifies missed: none will come for them
	if len(t.verifies) == 0 || t.verifies[0].n != n {
		return
	}
	v := t.verifies[0]
	t.verifies = t.verifies[1:]
	for i, rid := range r.rids {
		if i < len(r.counts) {
			m.late.Count(v.key, rid, r.counts[i])
		}
	}
	m.late.Close(v.key)
}

// drop lets verifies numbered up to n go on without counts.
func (m *CountMatcher) drop(t *countThread, n int) {
	for len(t.verifies) > 0 && t.verifies[0].n <= n {
		m.late.Close(t.verifies[0].key)
		t.verifies = t.verifies[1:]
	}
}

// restart gives up on what the thread has and starts matching afresh: a
// verify or a read was lost.
func (m *CountMatcher) restart(t *countThread) {
	m.Reset++
	for _, v := range t.verifies {
		m.late.Close(v.key)
	}
	*t = countThread{ahead: -1, alive: [2]bool{true, true}}
}

// Forget drops a thread that has exited: its verifies still waiting go on
// without counts, as none can come (where each thread is its own stream,
// its counts are read on it), and a new thread given its ID starts
// matching afresh instead of taking the dead thread's place. A stream that
// joins threads (Stream) outlives them and is kept.
func (m *CountMatcher) Forget(tid uint32) {
	if m.Stream != nil {
		return
	}
	if t := m.threads[tid]; t != nil {
		for _, v := range t.verifies {
			m.late.Close(v.key)
		}
		delete(m.threads, tid)
	}
}

// Lost says a verify or read of counts may have been lost on every thread
// (the ring buffer was full): matching starts over.
func (m *CountMatcher) Lost() {
	for _, t := range m.threads {
		m.restart(t)
	}
}

// LostOn says the same of one thread (a call that may or may not have been
// a verify: its when could not be read).
func (m *CountMatcher) LostOn(tid uint32) {
	if t := m.threads[m.stream(tid)]; t != nil {
		m.restart(t)
	}
}
