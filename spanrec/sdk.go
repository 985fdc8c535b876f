package spanrec

import (
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// ToSDK makes the SDK's read-only span of s, for an SDK span exporter
// (tracetest's in-memory exporter in the tests, any other a program plugs
// in). The fast exporters never call it.
func ToSDK(s *Span) sdktrace.ReadOnlySpan {
	tf := trace.TraceFlags(0).WithSampled(true)
	stub := tracetest.SpanStub{
		Name:        s.Name,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(s.Trace), SpanID: trace.SpanID(s.ID), TraceFlags: tf}),
		SpanKind:    trace.SpanKindInternal,
		StartTime:   unixTime(s.Start),
		EndTime:     unixTime(s.End),
		Attributes:  s.Attributes(),
	}
	if s.Parent != (SpanID{}) {
		stub.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(s.Trace), SpanID: trace.SpanID(s.Parent), TraceFlags: tf})
	}
	if s.Failed {
		stub.Status = sdktrace.Status{Code: codes.Error, Description: s.Err}
	}
	if s.Resource != nil {
		stub.Resource = s.Resource.SDK
	}
	if s.Scope != nil {
		stub.InstrumentationScope = instrumentation.Scope{Name: s.Scope.Name, Version: s.Scope.Version, SchemaURL: s.Scope.SchemaURL}
	}
	return stub.Snapshot()
}

// FromSDK is the record of an SDK span, for spans made with the SDK (the
// exporters' tests, a program's own tracer) sent through these exporters.
// Events, links and trace state are not kept: specprobe's spans have none.
// res caches the resources seen, so spans of one share its record.
func FromSDK(s sdktrace.ReadOnlySpan, res map[any]*Resource) *Span {
	sc := s.SpanContext()
	out := &Span{Name: s.Name(), Trace: TraceID(sc.TraceID()), ID: SpanID(sc.SpanID()), Parent: SpanID(s.Parent().SpanID()),
		Start: max(0, s.StartTime().UnixNano()), End: max(0, s.EndTime().UnixNano()), Own: s.Attributes()}
	if s.StartTime().IsZero() {
		out.Start = 0
	}
	if s.EndTime().IsZero() {
		out.End = 0
	}
	if st := s.Status(); st.Code == codes.Error {
		out.Failed, out.Err = true, st.Description
	}
	if r := s.Resource(); r != nil {
		key := any(r.Equivalent())
		if out.Resource = res[key]; out.Resource == nil {
			out.Resource = NewResource(r)
			res[key] = out.Resource
		}
	} else {
		out.Resource = NewResource(nil)
	}
	is := s.InstrumentationScope()
	out.Scope = &Scope{Name: is.Name, Version: is.Version, SchemaURL: is.SchemaURL}
	return out
}

// unixTime is t's time; 0 is no time (a span not ended).
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
