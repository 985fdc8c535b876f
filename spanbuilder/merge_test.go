package spanbuilder

import (
	"fmt"
	"slices"
	"testing"
)

func TestMerge(t *testing.T) {
	type step struct {
		src  int
		at   uint64 // an event at this time, or with mark a mark
		mark bool
	}
	ev := func(src int, at uint64) step { return step{src: src, at: at} }
	mark := func(src int, at uint64) step { return step{src: src, at: at, mark: true} }
	for _, c := range []struct {
		name  string
		steps []step
		want  []string // "src@at" in the order handed on, before the final Flush
	}{
		{"one source waits for the other's mark",
			[]step{ev(0, 10), ev(0, 20)}, nil},
		{"a mark lets the earlier go",
			[]step{ev(0, 10), ev(0, 20), mark(1, 15)}, []string{"0@10"}},
		{"the other's queued event orders them",
			[]step{ev(1, 30), ev(0, 10), ev(0, 40)}, []string{"0@10", "1@30"}},
		{"accept delivered before its verify goes after it",
			[]step{ev(1, 50), mark(1, 60), ev(0, 40), mark(0, 70)}, []string{"0@40", "1@50"}},
		{"a source's time never goes back",
			[]step{ev(0, 30), ev(0, 20), mark(1, 31)}, []string{"0@30", "0@20"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			m := NewMerge(2, func(src int, at uint64) { got = append(got, fmt.Sprintf("%d@%d", src, at)) })
			for _, s := range c.steps {
				if s.mark {
					m.Mark(s.src, s.at)
				} else {
					m.Add(s.src, s.at, s.at)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("handed on %v, want %v", got, c.want)
			}
			n := len(got)
			m.Flush()
			total := 0
			for _, s := range c.steps {
				if !s.mark {
					total++
				}
			}
			if len(got) != total {
				t.Fatalf("after Flush %d of %d events (%v, %d before)", len(got), total, got, n)
			}
		})
	}
}

// A silent source holds no more than MaxHeld events of the others.
func TestMergeBounded(t *testing.T) {
	n := 0
	m := NewMerge(2, func(int, int) { n++ })
	m.MaxHeld = 8
	for i := range 100 {
		m.Add(0, uint64(i), i)
	}
	if m.held > m.MaxHeld || m.Forced == 0 || n != 100-m.held {
		t.Fatalf("held %d (bound %d), forced %d, handed on %d", m.held, m.MaxHeld, m.Forced, n)
	}
}
