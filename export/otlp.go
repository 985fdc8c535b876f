package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
// No options are passed to the upstream exporters on purpose: that way every
// standard OTEL_EXPORTER_OTLP_[TRACES_]{ENDPOINT,HEADERS,INSECURE,TIMEOUT,
// COMPRESSION,CERTIFICATE} variable is honoured exactly as the SDK documents
// it. Neither exporter dials here, so a down endpoint does not fail startup.
func NewOTLP(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	p := ResolveProtocol(protocol)
	switch p {
	case ProtocolGRPC:
		return otlptracegrpc.New(ctx)
	case ProtocolHTTPProtobuf:
		return otlptracehttp.New(ctx)
	}
	return nil, fmt.Errorf("export: unsupported OTLP protocol %q (want %s or %s)",
		p, ProtocolGRPC, ProtocolHTTPProtobuf)
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
