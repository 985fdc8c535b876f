package spanrec

import (
	"math"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the OTLP messages written here (opentelemetry-proto's
// trace, common and resource protos; TestFieldNumbers checks each against
// the descriptors of go.opentelemetry.io/proto/otlp). Fields are written in
// number order, as proto.Marshal writes them, so the bytes are the same.
const (
	fRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fResourceSpansResource   = 1
	fResourceSpansScopeSpans = 2
	fResourceSpansSchemaURL  = 3

	fResourceAttributes = 1

	fScopeSpansScope     = 1
	fScopeSpansSpans     = 2
	fScopeSpansSchemaURL = 3

	fScopeName    = 1
	fScopeVersion = 2

	fSpanTraceID    = 1
	fSpanSpanID     = 2
	fSpanParentID   = 4
	fSpanName       = 5
	fSpanKind       = 6
	fSpanStart      = 7
	fSpanEnd        = 8
	fSpanAttributes = 9
	fSpanStatus     = 15
	fSpanFlags      = 16

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fArrayValues  = 1 // ArrayValue.values
	fKVListValues = 1 // KeyValueList.values
)

const (
	spanKindInternal = 1 // SPAN_KIND_INTERNAL
	statusCodeError  = 2 // STATUS_CODE_ERROR
	// Span flags: the W3C sampled flag, and "the parent's remoteness is
	// known" (it is never remote: specprobe starts every trace).
	spanFlags = 0x01 | 0x100
)

// begin starts a length-delimited field and returns where its length goes;
// end writes the length. One byte is kept for it, the body moved on in the
// rare case it needs more.
func begin(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return append(b, 0), len(b)
}

func end(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// validUTF8 is what a string becomes on the wire: protobuf strings and JSON
// must be UTF-8, and a target's bytes need not be (a forged rid would
// otherwise fail the whole batch).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return toValidUTF8(s)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, validUTF8(s))
}

func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, at := begin(b, num)
	if kv.Key != "" {
		b = appendString(b, fKeyValueKey, string(kv.Key))
	}
	b, v := begin(b, fKeyValueValue)
	b = appendAnyBody(b, kv.Value)
	return end(end(b, v), at)
}

// appendAnyBody writes an AnyValue's fields: its one value, present even
// when zero (a oneof).
func appendAnyBody(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendBool(b, v.AsBool())
	case attribute.INT64:
		return appendInt(b, v.AsInt64())
	case attribute.FLOAT64:
		return appendDouble(b, v.AsFloat64())
	case attribute.STRING:
		return appendString(b, fAnyString, v.AsString())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), appendBool)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), appendInt)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), appendDouble)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), func(b []byte, s string) []byte { return appendString(b, fAnyString, s) })
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, fAnyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), appendAnyBody)
	case attribute.MAP:
		b, at := begin(b, fAnyKVList)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, fKVListValues, kv)
		}
		return end(b, at)
	case attribute.EMPTY:
		return b // an AnyValue with no value set
	}
	return appendString(b, fAnyString, "INVALID")
}

func appendBool(b []byte, x bool) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, fAnyBool, protowire.VarintType), protowire.EncodeBool(x))
}

func appendInt(b []byte, x int64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, fAnyInt, protowire.VarintType), uint64(x))
}

func appendDouble(b []byte, x float64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type), math.Float64bits(x))
}

func appendArray[T any](b []byte, vs []T, elem func([]byte, T) []byte) []byte {
	b, at := begin(b, fAnyArray)
	for _, v := range vs {
		var e int
		b, e = begin(b, fArrayValues)
		b = end(elem(b, v), e)
	}
	return end(b, at)
}

// AppendRequest appends spans as one ExportTraceServiceRequest, grouped by
// resource and then scope in the order they first appear.
func AppendRequest(b []byte, spans []*Span) []byte {
	for _, g := range groups(spans) {
		var rs int
		b, rs = begin(b, fRequestResourceSpans)
		b = end(appendResourceSpans(b, &g), rs)
	}
	return b
}

// AppendResourceSpans appends the body of each ResourceSpans message of
// spans, one after the other, and where each ends in b.
func AppendResourceSpans(b []byte, spans []*Span) ([]byte, []int) {
	var ends []int
	for _, g := range groups(spans) {
		b = appendResourceSpans(b, &g)
		ends = append(ends, len(b))
	}
	return b, ends
}

func appendResourceSpans(b []byte, g *resGroup) []byte {
	var res, ss, sc int
	b, res = begin(b, fResourceSpansResource)
	if g.res != nil {
		b = append(b, g.res.pb...)
	}
	b = end(b, res)
	for _, sg := range g.scopes {
		b, ss = begin(b, fResourceSpansScopeSpans)
		b, sc = begin(b, fScopeSpansScope)
		if sg.scope != nil {
			if sg.scope.Name != "" {
				b = appendString(b, fScopeName, sg.scope.Name)
			}
			if sg.scope.Version != "" {
				b = appendString(b, fScopeVersion, sg.scope.Version)
			}
		}
		b = end(b, sc)
		for _, s := range sg.spans {
			b = appendSpan(b, s)
		}
		if sg.scope != nil && sg.scope.SchemaURL != "" {
			b = appendString(b, fScopeSpansSchemaURL, sg.scope.SchemaURL)
		}
		b = end(b, ss)
	}
	if g.res != nil && g.res.SchemaURL != "" {
		b = appendString(b, fResourceSpansSchemaURL, g.res.SchemaURL)
	}
	return b
}

func appendSpan(b []byte, s *Span) []byte {
	b, at := begin(b, fScopeSpansSpans)
	b = protowire.AppendTag(b, fSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, s.Trace[:])
	b = protowire.AppendTag(b, fSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, s.ID[:])
	if s.Parent != (SpanID{}) {
		b = protowire.AppendTag(b, fSpanParentID, protowire.BytesType)
		b = protowire.AppendBytes(b, s.Parent[:])
	}
	if s.Name != "" {
		b = appendString(b, fSpanName, s.Name)
	}
	b = protowire.AppendVarint(protowire.AppendTag(b, fSpanKind, protowire.VarintType), spanKindInternal)
	if s.Start > 0 {
		b = protowire.AppendFixed64(protowire.AppendTag(b, fSpanStart, protowire.Fixed64Type), uint64(s.Start))
	}
	if s.End > 0 {
		b = protowire.AppendFixed64(protowire.AppendTag(b, fSpanEnd, protowire.Fixed64Type), uint64(s.End))
	}
	for _, g := range s.Shared {
		if g != nil {
			b = append(b, g.pb...)
		}
	}
	for _, kv := range s.Own {
		b = appendKeyValue(b, fSpanAttributes, kv)
	}
	b, st := begin(b, fSpanStatus)
	if s.Failed {
		if s.Err != "" {
			b = appendString(b, fStatusMessage, s.Err)
		}
		b = protowire.AppendVarint(protowire.AppendTag(b, fStatusCode, protowire.VarintType), statusCodeError)
	}
	b = end(b, st)
	b = protowire.AppendFixed32(protowire.AppendTag(b, fSpanFlags, protowire.Fixed32Type), spanFlags)
	return end(b, at)
}

type resGroup struct {
	res    *Resource
	scopes []scopeGroup
}

type scopeGroup struct {
	scope *Scope
	spans []*Span
}

// groups sorts spans by resource and scope, keeping first-seen order. A
// batch comes from one session or a few, so a linear search is quickest.
func groups(spans []*Span) []resGroup {
	var out []resGroup
	for _, s := range spans {
		if s == nil {
			continue
		}
		i := 0
		for i < len(out) && out[i].res != s.Resource {
			i++
		}
		if i == len(out) {
			out = append(out, resGroup{res: s.Resource})
		}
		g := &out[i]
		j := 0
		for j < len(g.scopes) && !sameScope(g.scopes[j].scope, s.Scope) {
			j++
		}
		if j == len(g.scopes) {
			g.scopes = append(g.scopes, scopeGroup{scope: s.Scope})
		}
		g.scopes[j].spans = append(g.scopes[j].spans, s)
	}
	return out
}

func sameScope(a, b *Scope) bool {
	return a == b || a != nil && b != nil && *a == *b
}
