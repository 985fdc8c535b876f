package export_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/spanrec"
)

// sdkSpans makes spans with the SDK under two resources and two scopes:
// every attribute type, a long name (a length past one varint byte), an
// error status with and without a message, a string that is not UTF-8.
func sdkSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	long := string(bytes.Repeat([]byte("n"), 300))
	for i, res := range []*resource.Resource{
		resource.NewSchemaless(attribute.String("service.name", "a"), attribute.Int("process.pid", 1)),
		resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "b")),
	} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec))
		t0 := time.Unix(1_700_000_000, 123_456_789)
		for _, scope := range []string{"s1", "s2"} {
			tr := tp.Tracer(scope, trace.WithInstrumentationVersion("0.1"))
			ctx, root := tr.Start(context.Background(), long, trace.WithTimestamp(t0),
				trace.WithAttributes(attribute.Bool("b", i == 0), attribute.Int64("i", -7), attribute.Float64("f", 1e-9),
					attribute.Float64("g", 12345.5), attribute.String("s", "x\"\\\n\x01é"), attribute.String("bad", "a\xffb"),
					attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, -2}),
					attribute.Float64Slice("fs", []float64{1.5}), attribute.StringSlice("ss", []string{"a", ""}),
					attribute.StringSlice("none", nil), attribute.ByteSlice("by", []byte{0xde, 0xad}),
					attribute.Slice("sl", attribute.IntValue(1), attribute.StringValue("two")),
					attribute.Map("m", attribute.String("k", "v")), attribute.String(long, long)))
			_, child := tr.Start(ctx, "child", trace.WithTimestamp(t0.Add(time.Millisecond)))
			child.SetStatus(codes.Error, "boom")
			child.End(trace.WithTimestamp(t0.Add(2 * time.Millisecond)))
			_, bare := tr.Start(ctx, "bare", trace.WithTimestamp(t0))
			bare.SetStatus(codes.Error, "")
			bare.End(trace.WithTimestamp(t0))
			root.End(trace.WithTimestamp(t0.Add(3 * time.Millisecond)))
		}
		_ = tp.Shutdown(context.Background())
		out = append(out, rec.Ended()...)
	}
	return out
}

// The protobuf the exporters write from records is byte for byte what
// proto.Marshal makes of the go.opentelemetry.io/proto/otlp messages the
// SDK's transform builds (strings made valid UTF-8 first: proto.Marshal
// refuses the rest).
func TestProtobufMatchesSDK(t *testing.T) {
	spans := sdkSpans(t)
	want, err := proto.Marshal(&collectortrace.ExportTraceServiceRequest{ResourceSpans: export.ResourceSpans(validSpans(spans))})
	if err != nil {
		t.Fatal(err)
	}
	got := spanrec.AppendRequest(nil, records(spans))
	if !bytes.Equal(got, want) {
		t.Fatalf("protobuf differs from proto.Marshal's:\n got %x\nwant %x", got, want)
	}
	// The exporter's own path: one message per resource, fields kept raw.
	body, ends := spanrec.AppendResourceSpans(nil, records(spans))
	if len(ends) != 2 || ends[1] != len(body) {
		t.Errorf("resource ends %v of %d bytes", ends, len(body))
	}
}

// The otlp-file lines are byte for byte what the Collector's encoding
// (protojson, then hex ids) makes of the same request.
func TestJSONMatchesProtojson(t *testing.T) {
	spans := sdkSpans(t)
	want, err := export.MarshalOTLPJSON(&collectortrace.ExportTraceServiceRequest{ResourceSpans: export.ResourceSpans(validSpans(spans))})
	if err != nil {
		t.Fatal(err)
	}
	got := spanrec.AppendJSON(nil, records(spans))
	if !bytes.Equal(got, want) {
		t.Fatalf("JSON differs from protojson's:\n got %s\nwant %s", got, want)
	}
}

// validSpans replaces the attributes that are not UTF-8 the way the
// encoders do, for the reference, which cannot encode them.
func validSpans(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		stub := tracetest.SpanStubFromReadOnlySpan(s)
		for j, kv := range stub.Attributes {
			if kv.Key == "bad" {
				stub.Attributes[j] = attribute.String("bad", "a\uFFFDb")
			}
		}
		out[i] = stub.Snapshot()
	}
	return out
}
