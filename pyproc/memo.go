package pyproc

import "bytes"

// A memo is an answer about a type derived from the target's memory (where
// a name sits in the type's shared keys, what it is on the class), kept
// across Evals with the exact bytes the derivation read: the derivation is
// a function of those bytes alone, so while a re-read gives the same bytes
// it would give the same answer. The first Eval to use a memo reads them
// again — in a read the batch makes anyway, or in one of its own — and
// drops the memo if anything differs, so a keys object, class dict or
// descriptor changed or forged in place gives a fresh lookup, never the
// old answer.
type memo struct {
	proof  []segment // nil: the answer holds for the Eval that found it only
	gen    uint64    // the Eval that derived or last checked it
	hashOK int8      // the lookups it made probed by hash (1) or scanned
	bad    bool      // a check failed: its owner derives it anew
}

// segment is bytes read at addr.
type segment struct {
	addr uint64
	b    []byte
}

// Bounds on a proof: a shared-keys lookup reads a few hundred bytes in two
// or three reads, a class attribute a few more along the MRO.
const (
	maxProofReads = 64
	maxProofBytes = 16 << 10
)

// recorder is a Memory that notes every read made through it.
type recorder struct {
	r      Memory
	reads  []segment
	size   int
	failed bool // a read failed: the derivation took a path a re-read cannot vouch for
}

func (r *recorder) ReadAt(b []byte, addr uint64) error {
	err := r.r.ReadAt(b, addr)
	if err != nil || len(r.reads) == maxProofReads || r.size+len(b) > maxProofBytes {
		r.failed = true
	}
	if err == nil && !r.failed {
		r.reads, r.size = append(r.reads, segment{addr, bytes.Clone(b)}), r.size+len(b)
	}
	return err
}

// derive runs f with every read it makes recorded, and returns the memo
// of its answer: with a proof if every read succeeded within the bounds.
func (e *evaluator) derive(f func()) memo {
	saved := e.p.m
	rec := &recorder{r: saved.r}
	e.p.m = mem{rec}
	defer func() { e.p.m = saved }()
	f()
	m := memo{gen: e.tc.gen, hashOK: e.p.hashOK}
	if !rec.failed {
		m.proof = rec.reads
	}
	return m
}

// usable says whether a memo can serve this Eval: checked in it already,
// or with a proof to check.
func (e *evaluator) usable(m *memo) bool {
	return m != nil && !m.bad && m.hashOK == e.p.hashOK && (m.gen == e.tc.gen || m.proof != nil)
}

// proofCheck is a check of one memo: its reads in a segs, from first.
type proofCheck struct {
	m     *memo
	first int
}

// addCheck adds the re-reads of m's proof to s.
func addCheck(s *segs, m *memo) proofCheck {
	c := proofCheck{m: m, first: s.len()}
	for _, r := range m.proof {
		s.add(r.addr, len(r.b))
	}
	return c
}

// settle compares the re-read bytes with the proof: equal, the memo serves
// this Eval; else it is marked bad (its owner drops it).
func (e *evaluator) settle(s *segs, c proofCheck) bool {
	for i, r := range c.m.proof {
		b, err := s.block(c.first + i)
		if err != nil || !bytes.Equal(b.b, r.b) {
			c.m.bad = true
			return false
		}
	}
	c.m.gen = e.tc.gen
	return true
}

// confirm checks m in a read of its own, when the batch has not.
func (e *evaluator) confirm(m *memo) bool {
	if m.gen == e.tc.gen {
		return !m.bad
	}
	s := newSegs(len(m.proof))
	c := addCheck(s, m)
	e.p.run(s)
	return e.settle(s, c)
}
