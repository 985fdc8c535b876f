package spanbuilder

// Merge hands on what several sources (the ring buffers of one server's
// processes) saw, in the order it happened. A source's items keep their
// order; across sources, an item goes on once every other source has shown
// all it had before it: its queue holds a later item, or its mark says
// nothing earlier is still to come. The verifies of one process and the
// accepted counts read in another are matched by their order, which one
// process's ring buffer being read ahead of another's would scramble.
type Merge[T any] struct {
	queues [][]queued[T]
	marks  []uint64
	last   []uint64 // per source, the latest time queued: a source's times never go back
	out    func(src int, v T)
	held   int
	// MaxHeld bounds the items held for a source that stays silent: past
	// it the oldest go on, in the order they are (Forced counts them).
	MaxHeld int
	Forced  uint64
}

type queued[T any] struct {
	at uint64
	v  T
}

// NewMerge merges n sources into out.
func NewMerge[T any](n int, out func(src int, v T)) *Merge[T] {
	return &Merge[T]{queues: make([][]queued[T], n), marks: make([]uint64, n), last: make([]uint64, n), out: out, MaxHeld: 1 << 16}
}

// Add queues source src's next item, which happened at boot ns at, and
// hands on what can go.
func (m *Merge[T]) Add(src int, at uint64, v T) {
	at = max(at, m.last[src])
	m.last[src] = at
	m.queues[src] = append(m.queues[src], queued[T]{at: at, v: v})
	m.held++
	m.release()
}

// Mark says source src has handed on every event it made before t.
func (m *Merge[T]) Mark(src int, t uint64) {
	if t > m.marks[src] {
		m.marks[src] = t
		m.release()
	}
}

// Flush hands on everything held: every source has delivered all it will.
func (m *Merge[T]) Flush() {
	for i := range m.marks {
		m.marks[i] = ^uint64(0)
	}
	m.release()
}

func (m *Merge[T]) release() {
	for {
		src := -1
		for i, q := range m.queues {
			if len(q) > 0 && (src < 0 || q[0].at < m.queues[src][0].at) {
				src = i
			}
		}
		if src < 0 {
			return
		}
		at := m.queues[src][0].at
		if m.held <= m.MaxHeld {
			for i, q := range m.queues {
				if i != src && len(q) == 0 && m.marks[i] < at {
					return // source i may still have something earlier
				}
			}
		} else {
			m.Forced++
		}
		v := m.queues[src][0].v
		m.queues[src][0] = queued[T]{}
		m.queues[src] = m.queues[src][1:]
		m.held--
		m.out(src, v)
	}
}
