package bpfring

import (
	"testing"
	"time"
)

func TestRingClassify(t *testing.T) {
	t0 := time.Unix(1000, 0)
	busy56 := uint32(ringBusyBit | 56)
	cases := []struct {
		name       string
		cons, prod uint64
		hdr        uint32
		seen       []time.Time // earlier looks at the same busy record
		now        time.Time
		next       uint64
		step       ringStep
	}{
		{"committed", 0, 64, 56, nil, t0, 64, ringRecord},
		{"padded to 8", 64, 128, 50, nil, t0, 128, ringRecord},
		{"discarded", 0, 64, ringDiscardBit | 56, nil, t0, 64, ringSkip},
		{"busy, first look", 0, 64, busy56, nil, t0, 64, ringWait},
		{"busy for less than StuckAfter", 0, 64, busy56, []time.Time{t0}, t0.Add(StuckAfter - time.Millisecond), 64, ringWait},
		{"busy for StuckAfter: lost", 0, 64, busy56, []time.Time{t0}, t0.Add(StuckAfter), 64, ringStuck},
		{"busy long ago at another place: a new wait", 64, 128, busy56, []time.Time{t0.Add(-time.Hour)}, t0, 128, ringWait},
		{"length past the producer", 0, 32, 56, nil, t0, 64, ringCorrupt},
		{"length past the ring", 0, 1 << 40, 1<<20 + 8, nil, t0, 1<<20 + 16, ringCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Reader{mask: 1<<20 - 1}
			for _, at := range c.seen {
				r.classify(0, c.prod, busy56, at)
			}
			next, step := r.classify(c.cons, c.prod, c.hdr, c.now)
			if next != c.next || step != c.step {
				t.Errorf("classify = %d, %v; want %d, %v", next, step, c.next, c.step)
			}
			lost := uint64(0)
			if step == ringStuck {
				lost = 1
			}
			if r.Stuck() != lost {
				t.Errorf("Stuck = %d, want %d", r.Stuck(), lost)
			}
		})
	}
}
