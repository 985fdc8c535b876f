package spanbuilder_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
)

// TestSpanCostCoversHeap measures what the spans the sink makes take on
// the heap while a queue holds them (runtime.ReadMemStats around making
// and keeping them, garbage collected before each reading) and checks that
// spanrec's Cost, which the export queues bound their bytes by, is at least
// that. Requests of a batch of 4 go through 24 steps of draft, verify (with
// its accepted and drafted counts) and draft_extend, then end; a queue
// keeps every step, or runs of steps (a full queue sheds until a quarter
// of its budget is free again, export.Budget, so what it keeps comes in
// runs; the steps it sheds still pin the chunks their spans were carved
// from, which the runs share).
func TestSpanCostCoversHeap(t *testing.T) {
	for _, c := range []struct {
		name       string
		run, every int // a queue keeps run steps of every
		gpu        bool
	}{
		{"every step", 1, 1, false},
		{"every step, GPU attributes", 1, 1, true},
		{"32 steps of 64", 32, 64, false},
		{"128 steps of 256", 128, 256, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			heap, cost, n := measureSpans(c.run, c.every, c.gpu)
			t.Logf("%d spans kept: %.0f bytes of heap a span, Cost %.0f (own attributes and strings %.0f beyond the overhead)",
				n, float64(heap)/float64(n), float64(cost)/float64(n), float64(cost)/float64(n)-spanrec.SpanOverhead)
			if heap > cost {
				t.Errorf("%d spans kept %d bytes of heap, more than their Cost %d: raise spanrec.SpanOverhead", n, heap, cost)
			}
		})
	}
}

func measureSpans(run, every int, gpu bool) (heap, cost int64, n int) {
	const requests, steps, rounds = 4, 24, 400
	var kept []*spanrec.Span
	step := 0
	sink := spanbuilder.NewOTelSink(func(spans []*spanrec.Span) {
		step++
		if step%every < run {
			kept = append(kept, spans...)
		}
	}, spanrec.NewResource(nil), "specprobe")
	sink.Thread = func(pid, tid uint32) spanschema.Thread {
		return spanschema.Thread{Label: "Scheduler", HostID: "0123456789abcdef", TID: int(tid), TP: 0, PP: spanschema.NoRank, DP: spanschema.NoRank}
	}
	if gpu {
		sink.StageAttrs = func(uint32, time.Time, time.Time) []attribute.KeyValue {
			return []attribute.KeyValue{attribute.Float64("hw.gpu.utilization", 0.93), attribute.Int64("hw.gpu.memory.usage", 71<<30),
				attribute.Float64("hw.power", 412.5), attribute.Int64("specprobe.gpu.clock.sm", 1980)}
		}
	}
	before := heapInUse()
	now := t0
	for r := range rounds {
		for s := range steps {
			for q := range requests {
				rid := fmt.Sprintf("%032x", r*requests+q)
				sink.Step(spanbuilder.Step{RequestID: rid, PID: 7, TID: 11, Start: now, End: now.Add(900 * time.Microsecond),
					Calls: []spanbuilder.Call{
						{Stage: "draft", PID: 7, TID: 11, Start: now, End: now.Add(300 * time.Microsecond)},
						{Stage: "verify", PID: 7, TID: 11, Start: now.Add(300 * time.Microsecond), End: now.Add(700 * time.Microsecond),
							Values: []spanbuilder.Value{{Name: spanschema.ValueCorrect, V: int64(s % 4)}, {Name: spanschema.ValueDrafts, V: 4}}},
						{Stage: "draft_extend", PID: 7, TID: 11, Start: now.Add(700 * time.Microsecond), End: now.Add(900 * time.Microsecond)},
					}})
			}
			now = now.Add(time.Millisecond)
		}
		now = now.Add(3 * time.Second)
		sink.Expire(now) // the round's requests end: their root, thread and decode_forward spans
	}
	// The sink's chunks in use now are pinned by kept spans, not by the sink.
	sink.Close()
	after := heapInUse()
	for _, s := range kept {
		cost += s.Cost()
	}
	n = len(kept)
	runtime.KeepAlive(kept)
	runtime.KeepAlive(sink)
	return after - before, cost, n
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
