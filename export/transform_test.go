// The SDK's own span-to-protobuf transform, kept as the reference the
// exporters' encoding is checked against (encode_test.go): it builds the
// go.opentelemetry.io/proto/otlp messages field by field.
package export

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// ResourceSpans converts SDK spans into OTLP protos grouped by resource and
// then instrumentation scope. The SDK's own transform is internal to the
// otlptrace module, so we keep our own; unlike it, groups keep the order in
// which they were first seen, which makes file output reproducible.
func ResourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[scopeKey]*tracepb.ScopeSpans{}
	var out []*tracepb.ResourceSpans
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource()
		rk := res.Equivalent()
		rs, ok := byRes[rk]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: resourceProto(res), SchemaUrl: res.SchemaURL()}
			byRes[rk] = rs
			out = append(out, rs)
		}
		sc := s.InstrumentationScope()
		sk := scopeKey{rk, sc}
		ss, ok := byScope[sk]
		if !ok {
			ss = &tracepb.ScopeSpans{
				Scope: &commonpb.InstrumentationScope{
					Name:       sc.Name,
					Version:    sc.Version,
					Attributes: iterKeyValues(sc.Attributes.Iter()),
				},
				SchemaUrl: sc.SchemaURL,
			}
			byScope[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, SpanProto(s))
	}
	return out
}

func resourceProto(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return &resourcepb.Resource{}
	}
	return &resourcepb.Resource{Attributes: iterKeyValues(r.Iter())}
}

// SpanProto converts one SDK span into its OTLP form.
func SpanProto(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	st := s.Status()
	p := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Name:                   s.Name(),
		Kind:                   tracepb.Span_SpanKind(spanKind(s.SpanKind())),
		StartTimeUnixNano:      unixNano(s.StartTime().UnixNano()),
		EndTimeUnixNano:        unixNano(s.EndTime().UnixNano()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: clamp32(s.DroppedAttributes()),
		DroppedEventsCount:     clamp32(s.DroppedEvents()),
		DroppedLinksCount:      clamp32(s.DroppedLinks()),
		Status:                 statusProto(st.Code, st.Description),
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		p.ParentSpanId = psid[:]
	}
	p.Flags = spanFlags(sc.TraceFlags(), parent.IsRemote())
	for _, e := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{
			Name:                   e.Name,
			TimeUnixNano:           unixNano(e.Time.UnixNano()),
			Attributes:             keyValues(e.Attributes),
			DroppedAttributesCount: clamp32(e.DroppedAttributeCount),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{
			TraceId:                ltid[:],
			SpanId:                 lsid[:],
			TraceState:             l.SpanContext.TraceState().String(),
			Attributes:             keyValues(l.Attributes),
			DroppedAttributesCount: clamp32(l.DroppedAttributeCount),
			Flags:                  spanFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()),
		})
	}
	return p
}

// spanKind maps explicitly rather than casting so that a future SDK kind we
// do not know about becomes UNSPECIFIED instead of an invalid enum.
func spanKind(k trace.SpanKind) int32 {
	switch k {
	case trace.SpanKindInternal:
		return int32(tracepb.Span_SPAN_KIND_INTERNAL)
	case trace.SpanKindServer:
		return int32(tracepb.Span_SPAN_KIND_SERVER)
	case trace.SpanKindClient:
		return int32(tracepb.Span_SPAN_KIND_CLIENT)
	case trace.SpanKindProducer:
		return int32(tracepb.Span_SPAN_KIND_PRODUCER)
	case trace.SpanKindConsumer:
		return int32(tracepb.Span_SPAN_KIND_CONSUMER)
	}
	return int32(tracepb.Span_SPAN_KIND_UNSPECIFIED)
}

// statusProto is needed because the Go API numbers codes differently from
// OTLP (codes.Error is 1 in Go but STATUS_CODE_ERROR is 2 on the wire).
func statusProto(c codes.Code, msg string) *tracepb.Status {
	switch c {
	case codes.Ok:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	case codes.Error:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: msg}
	}
	return &tracepb.Status{}
}

// spanFlags follows the OTLP 1.x rule: the low byte carries W3C trace
// flags and bit 8 says whether bit 9 (remote parent) is meaningful.
func spanFlags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if remote {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

// unixNano clamps pre-1970 (and zero time.Time) values, which would
// otherwise wrap to enormous uint64 timestamps.
func unixNano(ns int64) uint64 { return uint64(max(0, ns)) }

func clamp32(v int) uint32 {
	return uint32(min(max(v, 0), math.MaxUint32))
}

func iterKeyValues(it attribute.Iterator) []*commonpb.KeyValue {
	var out []*commonpb.KeyValue
	for it.Next() {
		kv := it.Attribute()
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)}
	}
	return out
}

func arrayOf[T any](vs []T, conv func(T) *commonpb.AnyValue) *commonpb.AnyValue {
	arr := make([]*commonpb.AnyValue, len(vs))
	for i, v := range vs {
		arr[i] = conv(v)
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: arr}}}
}

func boolAV(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func intAV(i int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
}
func doubleAV(f float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
}
func stringAV(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return boolAV(v.AsBool())
	case attribute.INT64:
		return intAV(v.AsInt64())
	case attribute.FLOAT64:
		return doubleAV(v.AsFloat64())
	case attribute.STRING:
		return stringAV(v.AsString())
	case attribute.BOOLSLICE:
		return arrayOf(v.AsBoolSlice(), boolAV)
	case attribute.INT64SLICE:
		return arrayOf(v.AsInt64Slice(), intAV)
	case attribute.FLOAT64SLICE:
		return arrayOf(v.AsFloat64Slice(), doubleAV)
	case attribute.STRINGSLICE:
		return arrayOf(v.AsStringSlice(), stringAV)
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.SLICE:
		return arrayOf(v.AsSlice(), anyValue)
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{
			KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}}
	case attribute.EMPTY:
		// OTLP represents an empty value as an AnyValue with no oneof set.
		return &commonpb.AnyValue{}
	}
	return stringAV("INVALID")
}
