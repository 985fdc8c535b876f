package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/specprobe/specprobe/spanrec"
)

var errShutdown = errors.New("export: exporter is shut down")

// OTLP protocol names as spelled by OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// NewOTLP builds an OTLP trace exporter for protocol ("grpc" or
// "http/protobuf"). An empty protocol is taken from
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL, and
// defaults to grpc (the spec's default is http/protobuf, but local
// collectors and Jaeger/Tempo setups for this tool listen on 4317).
//
// It sends through the OpenTelemetry exporters' own clients, given no
// options on purpose: every standard OTEL_EXPORTER_OTLP_[TRACES_]{ENDPOINT,
// HEADERS,INSECURE,TIMEOUT,COMPRESSION,CERTIFICATE,CLIENT_*} variable is
// honoured exactly as the SDK documents it, with its retries. Neither
// client dials here, so a down endpoint does not fail startup.
func NewOTLP(ctx context.Context, protocol string) (Exporter, error) {
	var c otlptrace.Client
	switch p := ResolveProtocol(protocol); p {
	case ProtocolGRPC:
		c = otlptracegrpc.NewClient()
	case ProtocolHTTPProtobuf:
		c = otlptracehttp.NewClient()
	default:
		return nil, fmt.Errorf("export: unsupported OTLP protocol %q (want %s or %s)", p, ProtocolGRPC, ProtocolHTTPProtobuf)
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return &otlpExporter{client: c}, nil
}

// otlpExporter hands the client spans already in protobuf: each resource's
// ResourceSpans is encoded straight from the records (spanrec), and goes in
// a message whose fields are only those bytes, kept as its unknown fields,
// which proto.Marshal writes as they are. The request on the wire is the
// one the SDK's exporter would have sent (TestProtobufMatchesSDK), without
// a Go object per span and attribute on the way.
type otlpExporter struct {
	client   otlptrace.Client
	mu       sync.Mutex
	shutdown bool
	stopOnce sync.Once
}

var protoBufs = sync.Pool{New: func() any { return new([]byte) }}

func (e *otlpExporter) Export(ctx context.Context, spans []*spanrec.Span) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	shut := e.shutdown
	e.mu.Unlock()
	if shut {
		return errShutdown
	}
	bp := protoBufs.Get().(*[]byte)
	defer protoBufs.Put(bp)
	buf, ends := spanrec.AppendResourceSpans((*bp)[:0], spans)
	*bp = buf
	msgs := make([]*tracepb.ResourceSpans, len(ends))
	from := 0
	for i, to := range ends {
		msgs[i] = &tracepb.ResourceSpans{}
		msgs[i].ProtoReflect().SetUnknown(protoreflect.RawFields(buf[from:to]))
		from = to
	}
	return e.client.UploadTraces(ctx, msgs)
}

func (e *otlpExporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.shutdown = true
	e.mu.Unlock()
	var err error
	e.stopOnce.Do(func() { err = e.client.Stop(ctx) })
	return err
}

// ResolveProtocol applies NewOTLP's precedence: argument, traces-specific
// env var, generic env var, grpc.
func ResolveProtocol(protocol string) string {
	for _, p := range []string{
		protocol,
		os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
		os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"),
	} {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			return p
		}
	}
	return ProtocolGRPC
}
