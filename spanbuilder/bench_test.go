package spanbuilder_test

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanrec"
)

// benchStream is a realistic event stream: two worker threads, each serving a
// batch of 4 requests, steps of draft per request, one verify, accept per
// request, one draft_extend; the threads' events interleaved. It covers
// benchSteps steps per thread and lasts the returned number of boot ns.
func benchStream() ([]spanbuilder.Event, uint64) {
	const benchSteps = 32
	var per [2][]*spanbuilder.Event
	var end uint64
	for tid := uint32(1); tid <= 2; tid++ {
		var rids []string
		for r := 0; r < 4; r++ {
			rids = append(rids, fmt.Sprintf("%08x-req-%d-thread-%d-000000000000", r*7919+int(tid), r, tid))
		}
		ts := uint64(tid) * 3
		for s := 0; s < benchSteps; s++ {
			evs := stepEvents(tid, ts, rids...)
			per[tid-1] = append(per[tid-1], evs...)
			ts = evs[len(evs)-1].BootNs + 50
		}
		end = max(end, ts)
	}
	var out []spanbuilder.Event
	for i := 0; i < len(per[0]) || i < len(per[1]); i++ {
		for _, evs := range per {
			if i < len(evs) {
				out = append(out, *evs[i])
			}
		}
	}
	return out, end + 1000
}

type countSink struct{ steps, calls int }

func (c *countSink) Step(s spanbuilder.Step) {
	c.steps++
	c.calls += len(s.Calls)
}

// feed runs b.N events of the stream through the builder, shifting the stream
// forward in time each time it wraps; wrapped is called after each pass.
func feed(b *testing.B, bld *spanbuilder.Builder, evs []spanbuilder.Event, span uint64, wrapped func(passEnd uint64)) {
	b.ReportAllocs()
	b.ResetTimer()
	var base uint64 = 1_000_000
	for i, j := 0, 0; i < b.N; i++ {
		e := evs[j]
		e.BootNs += base
		bld.Add(&e)
		if j++; j == len(evs) {
			j = 0
			base += span
			if wrapped != nil {
				wrapped(base)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkBuilder(b *testing.B) {
	evs, span := benchStream()
	sink := &countSink{}
	bld := spanbuilder.New(testSites, spanbuilder.Clock{OffsetNs: offset}, sink)
	feed(b, bld, evs, span, nil)
	if b.N >= 2*len(evs) && sink.steps == 0 {
		b.Fatal("no steps reached the sink")
	}
}

// BenchmarkBuilderOTel: the builder and the span sink making every
// span's record (what the SDK's spans were before: made, not exported).
func BenchmarkBuilderOTel(b *testing.B) { benchSink(b, false) }

// BenchmarkBuilderOTLP: the same, the spans then encoded as OTLP protobuf
// in batches of 512 into one reused buffer, as the OTLP exporters do.
func BenchmarkBuilderOTLP(b *testing.B) { benchSink(b, true) }

func benchSink(b *testing.B, encode bool) {
	evs, span := benchStream()
	var buf []byte
	var batch []*spanrec.Span
	spans := 0
	sink := spanbuilder.NewOTelSink(func(s []*spanrec.Span) {
		spans += len(s)
		if !encode {
			return
		}
		if batch = append(batch, s...); len(batch) >= 512 {
			buf = spanrec.AppendRequest(buf[:0], batch)
			clear(batch)
			batch = batch[:0]
		}
	}, spanrec.NewResource(resource.NewSchemaless(attribute.String("service.name", "bench"), attribute.Int("process.pid", 4242))), "bench")
	clock := spanbuilder.Clock{OffsetNs: offset}
	bld := spanbuilder.New(testSites, clock, sink)
	// Each pass serves its requests to the end; expire their roots as the
	// tracer's ticker would.
	feed(b, bld, evs, span, func(passEnd uint64) {
		sink.Expire(clock.Wall(passEnd).Add(sink.IdleAfter + time.Nanosecond))
	})
	b.ReportMetric(float64(spans)/float64(b.N), "spans/event")
}
