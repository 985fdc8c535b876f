package pyproc

import (
	"fmt"
	"slices"
)

// segs gathers the reads of one step of a batched Eval, made together.
// Addresses and sizes are checked as mem.bytes checks them; a segment that
// fails the check is not read and keeps its error.
type segs struct {
	s   []seg
	err map[int]error // segments not read whole
}

type seg struct {
	addr uint64
	n    int
	b    []byte
}

func newSegs(n int) *segs { return &segs{s: make([]seg, 0, n)} }

func (s *segs) fail(i int, err error) {
	if s.err == nil {
		s.err = map[int]error{}
	}
	s.err[i] = err
}

func (s *segs) add(addr uint64, n int) int {
	s.s = append(s.s, seg{addr: addr, n: n})
	return len(s.s) - 1
}

func (s *segs) len() int { return len(s.s) }

// block is segment i as read; its error when it could not be read whole.
func (s *segs) block(i int) (block, error) {
	if err := s.err[i]; err != nil {
		return block{}, err
	}
	return block{s.s[i].addr, s.s[i].b}, nil
}

// A span is one read covering segments close to each other (objects
// allocated one after another): the kernel pins the pages of each iovec
// anew, which costs more than copying the bytes between segments. A gap
// under spanGap (less than a page) leaves no page in the span without a
// byte of a segment, so a span is as readable as its segments; spanMax
// bounds the bytes copied for one span.
type span struct {
	addr, end uint64
	lo, hi    int // its segments: order[lo:hi]
}

const (
	spanGap = 2048
	spanMax = 64 << 10
)

// segAt is a segment's address (high bits) and index (low 16 bits), so
// that sorting integers sorts segments by address. User-space addresses
// fit in 47 bits.
type segAt uint64

func (o segAt) addr() uint64 { return uint64(o) >> 16 }
func (o segAt) i() int       { return int(o & 0xffff) }

// spans groups segments (addresses and sizes) into spans: order lists the
// segments by address. More segments than an index holds get a span each.
// The slices returned are sc's, grown as needed.
func spans(addr []uint64, size []int, sc *arena) (order []segAt, out []span) {
	out = sc.spans[:0]
	defer func() { sc.spans = out }()
	if len(addr) > 0xffff {
		for i := range addr {
			out = append(out, span{addr[i], addr[i] + uint64(size[i]), i, i + 1})
		}
		return nil, out
	}
	order = slices.Grow(sc.order[:0], len(addr))[:len(addr)]
	sc.order = order
	for i, a := range addr {
		order[i] = segAt(a<<16 | uint64(i))
	}
	slices.Sort(order)
	for k, o := range order {
		a, e := addr[o.i()], addr[o.i()]+uint64(size[o.i()])
		if n := len(out); n > 0 && a <= out[n-1].end+spanGap && max(e, out[n-1].end)-out[n-1].addr <= spanMax {
			out[n-1].end = max(e, out[n-1].end)
			out[n-1].hi = k + 1
			continue
		}
		out = append(out, span{addr: a, end: e, lo: k, hi: k + 1})
	}
	return order, out
}

// arena hands out the buffers of one Eval's reads. The next Eval uses them
// again: nothing read into them is kept past an Eval (values are decoded
// into memory of their own, proofs copied).
type arena struct {
	buf []byte
	off int
	// What run needs for each call, kept for the next (run does not
	// nest, and nothing it returns points into these).
	addr      []uint64
	size, idx []int
	order     []segAt
	spans     []span
	rs        []Read
}

func (a *arena) take(n int) []byte {
	if a.off+n > len(a.buf) {
		// Blocks still in use keep the old buffer alive.
		a.buf, a.off = make([]byte, max(2*len(a.buf), n, 64<<10)), 0
	}
	b := a.buf[a.off : a.off+n : a.off+n]
	a.off += n
	return b
}

// run reads every segment of s: spans in one readV, then, in a second,
// the segments of any span of several that failed, each on its own — so
// one unreadable segment costs only itself.
func (p *Process) run(s *segs) {
	m, sc := p.m, &p.arena
	addr, size, idx := sc.addr[:0], sc.size[:0], sc.idx[:0] // idx: index in s.s of each segment read
	defer func() { sc.addr, sc.size, sc.idx = addr, size, idx }()
	for i := range s.s {
		g := &s.s[i]
		switch {
		case g.n < 0 || g.n > maxRead:
			s.fail(i, fmt.Errorf("read of %d bytes at %#x: size out of range", g.n, g.addr))
		case !validAddr(g.addr) || !validAddr(g.addr+uint64(g.n)):
			s.fail(i, fmt.Errorf("bad address %#x", g.addr))
		case g.n == 0:
			g.b = []byte{}
		default:
			addr, size, idx = append(addr, g.addr), append(size, g.n), append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	order, sp := spans(addr, size, sc)
	rs := slices.Grow(sc.rs[:0], len(sp))[:len(sp)]
	sc.rs = rs
	var total uint64
	for _, x := range sp {
		total += x.end - x.addr
	}
	buf := p.arena.take(int(total))
	for i, x := range sp {
		n := x.end - x.addr
		rs[i] = Read{Addr: x.addr, Buf: buf[:n:n]}
		buf = buf[n:]
	}
	readV(m.r, rs)
	var again []Read
	var at []int
	for i, x := range sp {
		for k := x.lo; k < x.hi; k++ {
			j := k
			if order != nil {
				j = order[k].i()
			}
			g := &s.s[idx[j]]
			switch {
			case rs[i].Err == nil:
				off := g.addr - x.addr
				g.b = rs[i].Buf[off : off+uint64(g.n) : off+uint64(g.n)]
			case x.hi-x.lo == 1:
				s.fail(idx[j], rs[i].Err)
			default:
				again, at = append(again, Read{Addr: g.addr, Buf: p.arena.take(g.n)}), append(at, idx[j])
			}
		}
	}
	if len(again) == 0 {
		return
	}
	readV(m.r, again)
	for k, i := range at {
		if err := again[k].Err; err != nil {
			s.fail(i, err)
		} else {
			s.s[i].b = again[k].Buf
		}
	}
}
