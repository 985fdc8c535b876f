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

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
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

// emitContract builds two requests in the shape the span builder gives
// them (package spanschema): root, thread span, decode_forward, one
// decode_loop, and under decode_forward separate drafts, one batched verify
// given to both, and a failing draft_extend shared by both. Stage spans:
// 2 draft, 2 verify (1 real call), 2 draft_extend (1 real call).
func emitContract(tp trace.TracerProvider) {
	tr := tp.Tracer("specprobe/test", trace.WithInstrumentationVersion("0.1"))
	th := spanschema.Thread{Label: "Scheduler", HostID: "feedc0de", TID: 101, TP: 0, PP: spanschema.NoRank, DP: spanschema.NoRank}
	for i, rid := range []string{ridA, ridB} {
		ctx, root := tr.Start(context.Background(), spanschema.RootSpan("", rid), trace.WithTimestamp(at(0)),
			trace.WithAttributes(spanschema.KeyRID.String(rid), spanschema.KeyModule.String(spanschema.ModuleRequest)))
		tctx, thread := tr.Start(ctx, th.SpanName(), trace.WithTimestamp(at(0)), trace.WithAttributes(th.Attributes()...))
		fctx, fwd := tr.Start(tctx, spanschema.DecodeForward, trace.WithTimestamp(at(100)),
			trace.WithAttributes(spanschema.KeyRID.String(rid)))
		_, loop := tr.Start(fctx, spanschema.DecodeLoop, trace.WithTimestamp(at(100)),
			trace.WithAttributes(spanschema.KeyRID.String(rid), spanschema.KeyDecodeCt.Int(0)))
		stage := func(st string, tid int64, from, to int64, extra ...attribute.KeyValue) trace.Span {
			attrs := append([]attribute.KeyValue{spanschema.KeyRID.String(rid),
				spanschema.KeyThreadID.Int64(tid), spanschema.KeyStage.String(st)}, extra...)
			_, s := tr.Start(fctx, spanschema.StageSpan(st), trace.WithTimestamp(at(from)), trace.WithAttributes(attrs...))
			return s
		}
		d := stage("draft", 101, 200+int64(i)*1000, 700+int64(i)*1000)
		d.End(trace.WithTimestamp(at(700 + int64(i)*1000)))
		correct := int64(3 - 2*i) // 3 for A, 1 for B
		v := stage("verify", 102, 3000, 5500, spanschema.ValueAttrs("num_correct_drafts", correct)...)
		v.End(trace.WithTimestamp(at(5500)))
		x := stage("draft_extend", 101, 6000, 6250)
		x.SetStatus(codes.Error, "cuda oom")
		x.End(trace.WithTimestamp(at(6250)))
		loop.SetStatus(codes.Error, "cuda oom")
		loop.End(trace.WithTimestamp(at(7000)))
		fwd.End(trace.WithTimestamp(at(7000)))
		thread.End(trace.WithTimestamp(at(7000)))
		root.End(trace.WithTimestamp(at(8000)))
	}
}

// contractSpans is how many spans emitContract makes.
const contractSpans = 2 * (4 + 3)

func recordContract(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(testResource()), sdktrace.WithSpanProcessor(rec))
	emitContract(tp)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != contractSpans {
		t.Fatalf("recorded %d spans, want %d", len(spans), contractSpans)
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

// viaSDK hands SDK spans to an exporter, as records (spanrec.FromSDK): the
// tests make their spans with the SDK, so that what the exporters are
// checked against is not made by the code under test.
type viaSDK struct{ export.Exporter }

func (v viaSDK) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	return v.Export(ctx, records(spans))
}

func records(spans []sdktrace.ReadOnlySpan) []*spanrec.Span {
	res := map[any]*spanrec.Resource{}
	out := make([]*spanrec.Span, len(spans))
	for i, s := range spans {
		out[i] = spanrec.FromSDK(s, res)
	}
	return out
}

func record(s sdktrace.ReadOnlySpan) *spanrec.Span { return records([]sdktrace.ReadOnlySpan{s})[0] }
