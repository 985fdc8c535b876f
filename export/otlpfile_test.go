package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/export/otlptest"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func TestOTLPFileRoundTrip(t *testing.T) {
	spans := recordContract(t)
	var buf bytes.Buffer
	exp := viaSDK{export.NewOTLPFile(&buf)}
	ctx := context.Background()
	if err := exp.ExportSpans(ctx, spans[:4]); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(ctx, spans[4:]); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want one per ExportSpans call:\n%s", len(lines), buf.String())
	}

	verify := find(t, spans, "spec_verify", ridB) // spans[4:] is request B
	// Hand check of the encoding the Collector's file exporter uses.
	var raw struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []map[string]any `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	if err := json.Unmarshal([]byte(lines[0]+lines[1]), &raw); err == nil {
		t.Fatal("two lines concatenated should not be one JSON value")
	}
	if err := json.Unmarshal([]byte(lines[1]), &raw); err != nil {
		t.Fatal(err)
	}
	var js map[string]any
	for _, s := range raw.ResourceSpans[0].ScopeSpans[0].Spans {
		if s["spanId"] == verify.SpanContext().SpanID().String() {
			js = s
		}
	}
	if js == nil {
		t.Fatalf("verify span id %s not found as lowercase hex in %s", verify.SpanContext().SpanID(), lines[1])
	}
	checks := map[string]any{
		"traceId":           verify.SpanContext().TraceID().String(),
		"parentSpanId":      verify.Parent().SpanID().String(),
		"startTimeUnixNano": "1700000000126456789", // t0 + 3000us, as a decimal string
		"endTimeUnixNano":   "1700000000128956789",
		"kind":              float64(1), // enums are integers
	}
	for k, want := range checks {
		if js[k] != want {
			t.Errorf("%s = %#v, want %#v", k, js[k], want)
		}
	}

	// Full decode back into the proto.
	req, err := export.UnmarshalOTLPJSON([]byte(lines[1]))
	if err != nil {
		t.Fatal(err)
	}
	rs := req.GetResourceSpans()
	if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 {
		t.Fatalf("want 1 resource with 1 scope, got %v", req)
	}
	res := otlptest.Span{Resource: rs[0].GetResource()}
	for k, want := range map[string]any{"service.name": "specprobe-test", "process.pid": int64(4242),
		"process.executable.name": "python3", "host.name": "testhost"} {
		if got := res.ResourceAttr(k); got != want {
			t.Errorf("resource %s = %v, want %v", k, got, want)
		}
	}
	if sc := rs[0].GetScopeSpans()[0].GetScope(); sc.GetName() != "specprobe/test" || sc.GetVersion() != "0.1" {
		t.Errorf("scope = %v", sc)
	}
	var got *tracepb.Span
	for _, s := range rs[0].GetScopeSpans()[0].GetSpans() {
		if s.GetName() == "spec_draft_extend" {
			got = s
		}
	}
	if got == nil {
		t.Fatal("draft_extend missing")
	}
	if got.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || got.GetStatus().GetMessage() != "cuda oom" {
		t.Errorf("status = %v", got.GetStatus())
	}
	if got.GetStartTimeUnixNano() != uint64(at(6000).UnixNano()) {
		t.Errorf("start = %d", got.GetStartTimeUnixNano())
	}
	s := otlptest.Span{Span: got}
	if s.Attr("thread.id") != int64(101) || s.Attr("specprobe.stage") != "draft_extend" {
		t.Errorf("attributes = %v", got.GetAttributes())
	}
}

// Every attribute type survives the file. specprobe's spans are internal,
// sampled, without events or links: an SDK span's kind, trace state,
// events and links are not carried by the records (spanrec.FromSDK).
func TestOTLPFileAllValueTypes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("t")
	_, s := tr.Start(context.Background(), "typed",
		trace.WithAttributes(
			attribute.Bool("b", true), attribute.Int64("i", -7), attribute.Float64("f", 0.5),
			attribute.String("s", "x"), attribute.BoolSlice("bs", []bool{true, false}),
			attribute.Int64Slice("is", []int64{1, 2}), attribute.Float64Slice("fs", []float64{1.5}),
			attribute.StringSlice("ss", []string{"a", "b"}), attribute.ByteSlice("by", []byte{0xde, 0xad}),
			attribute.Slice("sl", attribute.IntValue(1), attribute.StringValue("two")),
			attribute.Map("m", attribute.String("k", "v")),
		))
	s.End()
	_ = tp.Shutdown(context.Background())

	var buf bytes.Buffer
	if err := (viaSDK{export.NewOTLPFile(&buf)}).ExportSpans(context.Background(), rec.Ended()); err != nil {
		t.Fatal(err)
	}
	req, err := export.UnmarshalOTLPJSON(bytes.TrimSpace(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	p := otlptest.Span{Span: req.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0]}
	want := map[string]string{
		"b": "true", "i": "-7", "f": "0.5", "s": "x", "bs": "[true false]", "is": "[1 2]",
		"fs": "[1.5]", "ss": "[a b]", "by": "[222 173]", "sl": "[1 two]", "m": "map[k:v]",
	}
	for k, w := range want {
		if g := fmt.Sprint(p.Attr(k)); g != w {
			t.Errorf("attr %s = %s, want %s", k, g, w)
		}
	}
	if p.GetKind() != tracepb.Span_SPAN_KIND_INTERNAL || p.GetFlags() != 0x101 { // sampled | has-is-remote
		t.Errorf("kind %v flags %#x", p.GetKind(), p.GetFlags())
	}
	if !strings.Contains(buf.String(), `"bytesValue":"3q0="`) {
		t.Errorf("bytes attributes must stay base64: %s", buf.String())
	}
}

func idBytes(id trace.SpanID) []byte { return id[:] }
