package export

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/spanrec"
)

// Once spent, a budget sheds until a quarter of it is free again.
func TestBudgetSheds(t *testing.T) {
	b := NewBudget(1000)
	for i, c := range []struct {
		give, take int64
		ok         bool
		used       int64
	}{
		{0, 600, true, 600},
		{0, 300, true, 900},
		{0, 200, false, 900}, // no room: shedding
		{0, 50, false, 900},  // would fit, but still shedding
		{100, 50, false, 800},
		{50, 50, true, 800}, // 750 used: a quarter free
		{0, 150, true, 950},
		{0, 50, true, 1000}, // exactly full
		{0, 1, false, 1000},
		{1000, 1001, false, 0}, // larger than the budget: never
		{0, 1, true, 1},
	} {
		b.give(c.give)
		if ok := b.take(c.take); ok != c.ok || b.Used() != c.used {
			t.Errorf("%d: give %d, take %d = %v, used %d; want %v, %d", i, c.give, c.take, ok, b.Used(), c.ok, c.used)
		}
	}
}

// stuck blocks every export until its context ends or release closes.
type stuck struct{ release chan struct{} }

func (s stuck) Export(ctx context.Context, _ []*spanrec.Span) error {
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (stuck) Shutdown(context.Context) error { return nil }

// Queues sharing a budget behind a stalled exporter hold no more bytes
// than it, count what they shed, and give every byte back once the spans
// are exported or dropped.
func TestQueuesShareBudget(t *testing.T) {
	exp := stuck{make(chan struct{})}
	step := func(i int) []*spanrec.Span {
		var out []*spanrec.Span
		for range 4 {
			out = append(out, &spanrec.Span{Name: "spec_verify", Own: []attribute.KeyValue{attribute.Int("decode_ct", i), attribute.Int("n", 3)}})
		}
		return out
	}
	limit := 40 * step(0)[0].Cost() * 4 // forty steps
	b := NewBudget(limit)
	qs := []*QueueProcessor{NewQueueProcessor(exp, 1<<20, 8, time.Hour, b), NewQueueProcessor(exp, 1<<20, 8, time.Hour, b)}
	pushed := 0
	for i := range 500 {
		q := qs[i%2]
		q.Push(step(i)...)
		pushed += 4
		if b.Used() > limit {
			t.Fatalf("after %d steps %d bytes queued, over the budget's %d", i+1, b.Used(), limit)
		}
	}
	shed := qs[0].Shed() + qs[1].Shed()
	if want := uint64(pushed - 40*4); shed != want {
		t.Errorf("shed %d spans, want the %d past the budget's forty steps", shed, want)
	}
	close(exp.release)
	var exported, dropped uint64
	for _, q := range qs {
		if err := q.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		e, d, f := q.Stats()
		exported, dropped = exported+e, dropped+d+f
	}
	if exported+dropped != uint64(pushed) || dropped != shed {
		t.Errorf("exported %d, dropped %d of %d pushed; %d shed", exported, dropped, pushed, shed)
	}
	if b.Used() != 0 {
		t.Errorf("%d bytes still taken after shutdown", b.Used())
	}
}
