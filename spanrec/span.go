// Package spanrec holds the spans specprobe makes as plain records, and
// their OTLP forms: protobuf (protobuf.go) and the JSON of the Collector's
// file exporter (json.go). The span builder's sink fills them, the
// exporters encode them; no OpenTelemetry SDK span is made on the way.
// What a request's spans have in common (its resource, its rid and thread
// attributes) is one object the spans point to, encoded once.
package spanrec

import (
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
)

// TraceID and SpanID are OTLP's ids.
type (
	TraceID [16]byte
	SpanID  [8]byte
)

// Span is one finished span.
type Span struct {
	Name       string
	Trace      TraceID
	ID, Parent SpanID // Parent zero: a root
	Start, End int64  // unix ns
	Failed     bool   // status ERROR, with Err as its message
	Err        string
	Resource   *Resource
	Scope      *Scope
	// Shared attribute groups come first (several spans point to one;
	// nil ones are skipped), then Own.
	Shared [2]*Attrs
	Own    []attribute.KeyValue
}

// Attr finds an attribute of the span.
func (s *Span) Attr(key attribute.Key) (attribute.Value, bool) {
	for _, g := range s.Shared {
		if g == nil {
			continue
		}
		for _, kv := range g.KVs {
			if kv.Key == key {
				return kv.Value, true
			}
		}
	}
	for _, kv := range s.Own {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// Attributes lists the span's attributes, shared ones first.
func (s *Span) Attributes() []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, g := range s.Shared {
		if g != nil {
			out = append(out, g.KVs...)
		}
	}
	return append(out, s.Own...)
}

// Attrs is a group of attributes several spans share, with its protobuf
// form encoded once.
type Attrs struct {
	KVs []attribute.KeyValue
	pb  []byte // span attribute entries (field 9), ready to copy
}

// NewAttrs makes a shared group; the KeyValues must not change after.
func NewAttrs(kvs ...attribute.KeyValue) *Attrs {
	a := &Attrs{KVs: kvs}
	for _, kv := range kvs {
		a.pb = appendKeyValue(a.pb, fSpanAttributes, kv)
	}
	return a
}

// Resource is the traced process's resource, encoded once.
type Resource struct {
	Attrs     []attribute.KeyValue
	SchemaURL string
	SDK       *resource.Resource // what it was made from: for SDK exporters
	pb        []byte             // the Resource message's body
	json      []byte             // its OTLP/JSON object
}

// NewResource takes the SDK's resource (nil: an empty one).
func NewResource(r *resource.Resource) *Resource {
	out := &Resource{SDK: r}
	if r != nil {
		out.Attrs, out.SchemaURL = r.Attributes(), r.SchemaURL()
	}
	for _, kv := range out.Attrs {
		out.pb = appendKeyValue(out.pb, fResourceAttributes, kv)
	}
	out.json = appendJSONAttrsObject(nil, out.Attrs)
	return out
}

// Scope is the instrumentation scope spans are made under.
type Scope struct {
	Name, Version, SchemaURL string
}

// IDs makes random trace and span ids. It is not safe for concurrent use:
// each sink has its own.
type IDs struct{ r *rand.ChaCha8 }

// NewIDs seeds a generator from the runtime's random source.
func NewIDs() *IDs {
	var seed [32]byte
	for i := 0; i < len(seed); i += 8 {
		v := rand.Uint64()
		for j := range 8 {
			seed[i+j] = byte(v >> (8 * j))
		}
	}
	return &IDs{r: rand.NewChaCha8(seed)}
}

// Trace is a new trace id, never zero.
func (g *IDs) Trace() TraceID {
	var t TraceID
	for t == (TraceID{}) {
		_, _ = g.r.Read(t[:])
	}
	return t
}

// Span is a new span id, never zero.
func (g *IDs) Span() SpanID {
	var s SpanID
	for s == (SpanID{}) {
		_, _ = g.r.Read(s[:])
	}
	return s
}
