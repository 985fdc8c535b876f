package export

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// NewOTLPMetricReader exports metrics over OTLP every OTEL_METRIC_EXPORT_INTERVAL
// (default 60s). protocol is "grpc" or "http/protobuf"; empty takes
// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL, then
// grpc, as the span exporter does. Endpoint, headers and TLS come from the
// standard OTEL_EXPORTER_OTLP_[METRICS_]* variables.
func NewOTLPMetricReader(ctx context.Context, protocol string, opts ...sdkmetric.PeriodicReaderOption) (sdkmetric.Reader, error) {
	p := ProtocolGRPC
	for _, c := range []string{protocol, os.Getenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")} {
		if c = strings.ToLower(strings.TrimSpace(c)); c != "" {
			p = c
			break
		}
	}
	var exp sdkmetric.Exporter
	var err error
	switch p {
	case ProtocolGRPC:
		exp, err = otlpmetricgrpc.New(ctx)
	case ProtocolHTTPProtobuf:
		exp, err = otlpmetrichttp.New(ctx)
	default:
		return nil, fmt.Errorf("metrics: unsupported OTLP protocol %q (want %s or %s)", p, ProtocolGRPC, ProtocolHTTPProtobuf)
	}
	if err != nil {
		return nil, err
	}
	return sdkmetric.NewPeriodicReader(exp, opts...), nil
}
