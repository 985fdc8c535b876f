// Package otlptest runs an in-process OTLP trace receiver for end-to-end
// tests, so tests exercise the real otlptracegrpc/otlptracehttp clients
// and wire format instead of a fake exporter.
package otlptest

import (
	"cmp"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // accept OTEL_EXPORTER_OTLP_COMPRESSION=gzip
	"google.golang.org/protobuf/proto"
)

// Receiver collects every ExportTraceServiceRequest sent to it.
type Receiver struct {
	// Protocol is "grpc" (the default) or "http/protobuf".
	Protocol string

	collectortrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	reqs     []*collectortrace.ExportTraceServiceRequest
	endpoint string
}

// Span is a received span with the resource and scope it arrived under.
type Span struct {
	*tracepb.Span
	Resource *resourcepb.Resource
	Scope    *commonpb.InstrumentationScope
}

// Start listens on 127.0.0.1:0 and stops the server when t ends.
func (r *Receiver) Start(t testing.TB) {
	t.Helper()
	switch r.Protocol {
	case "", "grpc":
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("otlptest: listen: %v", err)
		}
		srv := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(srv, r)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		r.endpoint = "http://" + lis.Addr().String()
	case "http/protobuf":
		srv := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
		t.Cleanup(srv.Close)
		r.endpoint = srv.URL
	default:
		t.Fatalf("otlptest: unsupported protocol %q", r.Protocol)
	}
}

// Endpoint is the base URL (http://127.0.0.1:PORT) for
// OTEL_EXPORTER_OTLP_ENDPOINT; the HTTP exporter appends /v1/traces itself.
func (r *Receiver) Endpoint() string { return r.endpoint }

// SetEnv points the standard OTLP exporter variables at r for the rest of
// the test. Traces-specific variables inherited from the developer's shell
// would take precedence, so they are blanked (the SDK treats "" as unset).
// It uses t.Setenv, so the test must not be parallel.
func (r *Receiver) SetEnv(t testing.TB) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", cmp.Or(r.Protocol, "grpc"))
	for _, k := range []string{"ENDPOINT", "INSECURE", "PROTOCOL", "HEADERS", "CERTIFICATE"} {
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_"+k, "")
	}
}

// Export implements the gRPC TraceService.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, hr *http.Request) {
	if hr.URL.Path != "/v1/traces" || hr.Method != http.MethodPost {
		http.NotFound(w, hr)
		return
	}
	if ct := hr.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "otlptest: only application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = hr.Body
	if hr.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(hr.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(raw, req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(req)
	resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

func (r *Receiver) add(req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
}

// Requests returns the raw requests received so far.
func (r *Receiver) Requests() []*collectortrace.ExportTraceServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*collectortrace.ExportTraceServiceRequest(nil), r.reqs...)
}

// Spans flattens every received request, in arrival order.
func (r *Receiver) Spans() []Span {
	var out []Span
	for _, req := range r.Requests() {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, Span{Span: s, Resource: rs.GetResource(), Scope: ss.GetScope()})
				}
			}
		}
	}
	return out
}

// WaitSpans polls until at least n spans arrived or timeout passes, for
// tests that do not shut the exporter down before asserting.
func (r *Receiver) WaitSpans(t testing.TB, n int, timeout time.Duration) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if len(spans) >= n || time.Now().After(deadline) {
			if len(spans) < n {
				t.Fatalf("otlptest: got %d spans, want at least %d", len(spans), n)
			}
			return spans
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Attr returns the span attribute key as a Go value (see Value), or nil.
func (s Span) Attr(key string) any { return Lookup(s.GetAttributes(), key) }

// ResourceAttr returns the resource attribute key as a Go value, or nil.
func (s Span) ResourceAttr(key string) any { return Lookup(s.Resource.GetAttributes(), key) }

// Lookup finds key in kvs and converts it with Value.
func Lookup(kvs []*commonpb.KeyValue, key string) any {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return Value(kv.GetValue())
		}
	}
	return nil
}

// Value converts an AnyValue to string, bool, int64, float64, []byte,
// []any or map[string]any, so assertions can compare with plain literals.
func Value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		out := []any{}
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, Value(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		out := map[string]any{}
		for _, kv := range x.KvlistValue.GetValues() {
			out[kv.GetKey()] = Value(kv.GetValue())
		}
		return out
	}
	return nil
}
