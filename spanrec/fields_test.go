package spanrec

import (
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The field numbers written are the OTLP protos' own.
func TestFieldNumbers(t *testing.T) {
	for _, c := range []struct {
		msg   protoreflect.ProtoMessage
		field string
		num   int
	}{
		{&collectortrace.ExportTraceServiceRequest{}, "resource_spans", fRequestResourceSpans},
		{&tracepb.ResourceSpans{}, "resource", fResourceSpansResource},
		{&tracepb.ResourceSpans{}, "scope_spans", fResourceSpansScopeSpans},
		{&tracepb.ResourceSpans{}, "schema_url", fResourceSpansSchemaURL},
		{&resourcepb.Resource{}, "attributes", fResourceAttributes},
		{&tracepb.ScopeSpans{}, "scope", fScopeSpansScope},
		{&tracepb.ScopeSpans{}, "spans", fScopeSpansSpans},
		{&tracepb.ScopeSpans{}, "schema_url", fScopeSpansSchemaURL},
		{&commonpb.InstrumentationScope{}, "name", fScopeName},
		{&commonpb.InstrumentationScope{}, "version", fScopeVersion},
		{&tracepb.Span{}, "trace_id", fSpanTraceID},
		{&tracepb.Span{}, "span_id", fSpanSpanID},
		{&tracepb.Span{}, "parent_span_id", fSpanParentID},
		{&tracepb.Span{}, "name", fSpanName},
		{&tracepb.Span{}, "kind", fSpanKind},
		{&tracepb.Span{}, "start_time_unix_nano", fSpanStart},
		{&tracepb.Span{}, "end_time_unix_nano", fSpanEnd},
		{&tracepb.Span{}, "attributes", fSpanAttributes},
		{&tracepb.Span{}, "status", fSpanStatus},
		{&tracepb.Span{}, "flags", fSpanFlags},
		{&tracepb.Status{}, "message", fStatusMessage},
		{&tracepb.Status{}, "code", fStatusCode},
		{&commonpb.KeyValue{}, "key", fKeyValueKey},
		{&commonpb.KeyValue{}, "value", fKeyValueValue},
		{&commonpb.AnyValue{}, "string_value", fAnyString},
		{&commonpb.AnyValue{}, "bool_value", fAnyBool},
		{&commonpb.AnyValue{}, "int_value", fAnyInt},
		{&commonpb.AnyValue{}, "double_value", fAnyDouble},
		{&commonpb.AnyValue{}, "array_value", fAnyArray},
		{&commonpb.AnyValue{}, "kvlist_value", fAnyKVList},
		{&commonpb.AnyValue{}, "bytes_value", fAnyBytes},
		{&commonpb.ArrayValue{}, "values", fArrayValues},
		{&commonpb.KeyValueList{}, "values", fKVListValues},
	} {
		d := c.msg.ProtoReflect().Descriptor()
		f := d.Fields().ByName(protoreflect.Name(c.field))
		if f == nil || int(f.Number()) != c.num {
			t.Errorf("%s.%s: have %d, the proto says %v", d.Name(), c.field, c.num, f)
		}
	}
	if int32(tracepb.Span_SPAN_KIND_INTERNAL) != spanKindInternal || int32(tracepb.Status_STATUS_CODE_ERROR) != statusCodeError ||
		uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)|1 != spanFlags {
		t.Error("enum values differ from the proto's")
	}
}
