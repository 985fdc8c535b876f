package spanrec

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
)

// AppendJSON appends spans as one ExportTraceServiceRequest in OTLP/JSON,
// the way the Collector's file exporter writes it: protojson's field names
// and order (the protos' declaration order), zero values left out,
// integer enums, 64-bit integers as strings, ids in hex, one line without
// a trailing newline. TestJSONMatchesProtojson holds it to protojson.
func AppendJSON(b []byte, spans []*Span) []byte {
	b = append(b, `{"resourceSpans":[`...)
	for i, g := range groups(spans) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"resource":`...)
		if g.res != nil {
			b = append(b, g.res.json...)
		} else {
			b = append(b, "{}"...)
		}
		b = append(b, `,"scopeSpans":[`...)
		for j, sg := range g.scopes {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"scope":{`...)
			sep := ""
			if sg.scope != nil && sg.scope.Name != "" {
				b = appendJSONString(append(b, `"name":`...), sg.scope.Name)
				sep = ","
			}
			if sg.scope != nil && sg.scope.Version != "" {
				b = appendJSONString(append(b, sep+`"version":`...), sg.scope.Version)
			}
			b = append(b, `},"spans":[`...)
			for k, s := range sg.spans {
				if k > 0 {
					b = append(b, ',')
				}
				b = appendJSONSpan(b, s)
			}
			b = append(b, ']')
			if sg.scope != nil && sg.scope.SchemaURL != "" {
				b = appendJSONString(append(b, `,"schemaUrl":`...), sg.scope.SchemaURL)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
		if g.res != nil && g.res.SchemaURL != "" {
			b = appendJSONString(append(b, `,"schemaUrl":`...), g.res.SchemaURL)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendJSONSpan(b []byte, s *Span) []byte {
	b = append(b, `{"traceId":"`...)
	b = hex.AppendEncode(b, s.Trace[:])
	b = append(b, `","spanId":"`...)
	b = hex.AppendEncode(b, s.ID[:])
	b = append(b, '"')
	if s.Parent != (SpanID{}) {
		b = append(b, `,"parentSpanId":"`...)
		b = hex.AppendEncode(b, s.Parent[:])
		b = append(b, '"')
	}
	b = append(b, `,"flags":`...)
	b = strconv.AppendUint(b, spanFlags, 10)
	if s.Name != "" {
		b = appendJSONString(append(b, `,"name":`...), s.Name)
	}
	b = append(b, `,"kind":`...)
	b = strconv.AppendInt(b, spanKindInternal, 10)
	if s.Start > 0 {
		b = append(b, `,"startTimeUnixNano":"`...)
		b = append(strconv.AppendInt(b, s.Start, 10), '"')
	}
	if s.End > 0 {
		b = append(b, `,"endTimeUnixNano":"`...)
		b = append(strconv.AppendInt(b, s.End, 10), '"')
	}
	n := len(s.Own)
	for _, g := range s.Shared {
		if g != nil {
			n += len(g.KVs)
		}
	}
	if n > 0 {
		b = append(b, `,"attributes":[`...)
		first := true
		for _, g := range s.Shared {
			if g != nil {
				b = appendJSONKeyValues(b, g.KVs, &first)
			}
		}
		b = appendJSONKeyValues(b, s.Own, &first)
		b = append(b, ']')
	}
	b = append(b, `,"status":{`...)
	if s.Failed {
		if s.Err != "" {
			b = appendJSONString(append(b, `"message":`...), s.Err)
			b = append(b, ',')
		}
		b = append(b, `"code":`...)
		b = strconv.AppendInt(b, statusCodeError, 10)
	}
	return append(b, "}}"...)
}

// appendJSONAttrsObject is a Resource's object: {"attributes":[...]}, or {}.
func appendJSONAttrsObject(b []byte, kvs []attribute.KeyValue) []byte {
	if len(kvs) == 0 {
		return append(b, "{}"...)
	}
	first := true
	b = appendJSONKeyValues(append(b, `{"attributes":[`...), kvs, &first)
	return append(b, "]}"...)
}

func appendJSONKeyValues(b []byte, kvs []attribute.KeyValue, first *bool) []byte {
	for _, kv := range kvs {
		if !*first {
			b = append(b, ',')
		}
		*first = false
		b = appendJSONKeyValue(b, kv)
	}
	return b
}

func appendJSONKeyValue(b []byte, kv attribute.KeyValue) []byte {
	b = append(b, '{')
	if kv.Key != "" {
		b = appendJSONString(append(b, `"key":`...), string(kv.Key))
		b = append(b, ',')
	}
	b = append(b, `"value":`...)
	return append(appendJSONAny(b, kv.Value), '}')
}

func appendJSONAny(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendJSONBool(b, v.AsBool())
	case attribute.INT64:
		return appendJSONInt(b, v.AsInt64())
	case attribute.FLOAT64:
		return appendJSONDouble(b, v.AsFloat64())
	case attribute.STRING:
		return appendJSONStringValue(b, v.AsString())
	case attribute.BOOLSLICE:
		return appendJSONArray(b, v.AsBoolSlice(), appendJSONBool)
	case attribute.INT64SLICE:
		return appendJSONArray(b, v.AsInt64Slice(), appendJSONInt)
	case attribute.FLOAT64SLICE:
		return appendJSONArray(b, v.AsFloat64Slice(), appendJSONDouble)
	case attribute.STRINGSLICE:
		return appendJSONArray(b, v.AsStringSlice(), appendJSONStringValue)
	case attribute.BYTESLICE:
		b = append(b, `{"bytesValue":"`...)
		return append(base64.StdEncoding.AppendEncode(b, v.AsByteSlice()), `"}`...)
	case attribute.SLICE:
		return appendJSONArray(b, v.AsSlice(), appendJSONAny)
	case attribute.MAP:
		kvs := v.AsMap()
		if len(kvs) == 0 {
			return append(b, `{"kvlistValue":{}}`...)
		}
		first := true
		b = appendJSONKeyValues(append(b, `{"kvlistValue":{"values":[`...), kvs, &first)
		return append(b, "]}}"...)
	case attribute.EMPTY:
		return append(b, "{}"...)
	}
	return appendJSONStringValue(b, "INVALID")
}

func appendJSONBool(b []byte, x bool) []byte {
	return append(strconv.AppendBool(append(b, `{"boolValue":`...), x), '}')
}

func appendJSONInt(b []byte, x int64) []byte {
	return append(strconv.AppendInt(append(b, `{"intValue":"`...), x, 10), `"}`...)
}

func appendJSONDouble(b []byte, x float64) []byte {
	return append(appendJSONFloat(append(b, `{"doubleValue":`...), x), '}')
}

func appendJSONStringValue(b []byte, s string) []byte {
	return append(appendJSONString(append(b, `{"stringValue":`...), s), '}')
}

func appendJSONArray[T any](b []byte, vs []T, elem func([]byte, T) []byte) []byte {
	if len(vs) == 0 {
		return append(b, `{"arrayValue":{}}`...)
	}
	b = append(b, `{"arrayValue":{"values":[`...)
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, v)
	}
	return append(b, "]}}"...)
}

// appendJSONFloat formats as protojson does (encoding/json's rules, NaN
// and the infinities as strings).
func appendJSONFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

// appendJSONString quotes s as protojson does: ", \ and control
// characters escaped, the rest as is; invalid UTF-8 is replaced first.
func appendJSONString(b []byte, s string) []byte {
	s = validUTF8(s)
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c != '"' && c != '\\' {
			j := i + 1
			for j < len(s) && s[j] >= ' ' && s[j] != '"' && s[j] != '\\' {
				j++
			}
			b = append(b, s[i:j]...)
			i = j
			continue
		}
		b = append(b, '\\')
		switch c {
		case '"', '\\':
			b = append(b, c)
		case '\b':
			b = append(b, 'b')
		case '\f':
			b = append(b, 'f')
		case '\n':
			b = append(b, 'n')
		case '\r':
			b = append(b, 'r')
		case '\t':
			b = append(b, 't')
		default:
			b = append(b, 'u')
			b = append(b, "0000"[1+(bits.Len32(uint32(c))-1)/4:]...)
			b = strconv.AppendUint(b, uint64(c), 16)
		}
		i++
	}
	return append(b, '"')
}

func toValidUTF8(s string) string { return strings.ToValidUTF8(s, string(utf8.RuneError)) }
