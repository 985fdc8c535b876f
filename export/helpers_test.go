package export_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// t0 has a non-zero nanosecond part so unit conversions that round or
// go through float64 show up as mismatches.
var t0 = time.Unix(1_700_000_000, 123_456_789)

func at(us int64) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }

func testResource() *resource.Resource {
	return resource.NewSchemaless(
		attribute.String("service.name", "specprobe-test"),
		attribute.Int("process.pid", 4242),
		attribute.String("process.executable.name", "python3"),
		attribute.String("host.name", "testhost"),
	)
}

const (
	ridA = "aaaaaaaa-1111"
	ridB = "bbbbbbbb-2222"
)

// emitContract builds two requests the way the span builder does:
// separate drafts, one batched verify given to both, and a failing
// draft_extend shared by both. Stage spans: 2 draft, 2 verify (1 real
// call), 2 draft_extend (1 real call).
func emitContract(tp trace.TracerProvider) {
	tr := tp.Tracer("specprobe/test", trace.WithInstrumentationVersion("0.1"))
	for i, rid := range []string{ridA, ridB} {
		ctx, root := tr.Start(context.Background(), "Req "+rid[:8], trace.WithTimestamp(at(0)),
			trace.WithAttributes(attribute.String("rid", rid), attribute.String("module", "specprobe::request")))
		sctx, step := tr.Start(ctx, "decode_forward", trace.WithTimestamp(at(100)),
			trace.WithAttributes(attribute.String("rid", rid)))
		stage := func(name, st string, tid int64, from, to int64, extra ...attribute.KeyValue) trace.Span {
			attrs := append([]attribute.KeyValue{attribute.String("rid", rid),
				attribute.Int64("thread.id", tid), attribute.String("specprobe.stage", st)}, extra...)
			_, s := tr.Start(sctx, name, trace.WithTimestamp(at(from)), trace.WithAttributes(attrs...))
			return s
		}
		d := stage("spec_draft", "draft", 101, 200+int64(i)*1000, 700+int64(i)*1000)
		d.End(trace.WithTimestamp(at(700 + int64(i)*1000)))
		correct := int64(3 - 2*i) // 3 for A, 1 for B
		v := stage("spec_verify", "verify", 102, 3000, 5500,
			attribute.Int64("num_correct_drafts", correct), attribute.Int64("accepted_tokens", correct))
		v.End(trace.WithTimestamp(at(5500)))
		x := stage("spec_draft_extend", "draft_extend", 101, 6000, 6250)
		x.SetStatus(codes.Error, "cuda oom")
		x.End(trace.WithTimestamp(at(6250)))
		step.End(trace.WithTimestamp(at(7000)))
		root.End(trace.WithTimestamp(at(8000)))
	}
}

func recordContract(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(testResource()), sdktrace.WithSpanProcessor(rec))
	emitContract(tp)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 2*(2+3) {
		t.Fatalf("recorded %d spans, want 10", len(spans))
	}
	return spans
}

func find(t *testing.T, spans []sdktrace.ReadOnlySpan, name, rid string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if s.Name() == name && kv.Key == "rid" && kv.Value.AsString() == rid {
				return s
			}
		}
	}
	t.Fatalf("no span %s for %s", name, rid)
	return nil
}

// bufCloser records Close so tests can check Perfetto closes its writer.
type bufCloser struct {
	data   []byte
	closed bool
}

func (b *bufCloser) Write(p []byte) (int, error) { b.data = append(b.data, p...); return len(p), nil }
func (b *bufCloser) Close() error                { b.closed = true; return nil }
