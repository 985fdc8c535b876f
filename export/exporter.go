// Package export turns the spans specprobe builds into files, terminal
// output and OTLP streams, each exporter behind a bounded QueueProcessor.
package export

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/spanrec"
)

// Exporter sends finished spans somewhere. Every exporter here sits behind
// a QueueProcessor, so none of them can stall the tracer that feeds it;
// Export must not keep the slice.
type Exporter interface {
	Export(ctx context.Context, spans []*spanrec.Span) error
	Shutdown(ctx context.Context) error
}

// Named is an exporter with the name it was asked for by.
type Named struct {
	Name     string
	Exporter Exporter
	// SpanExporter, set instead of Exporter, is an OpenTelemetry SDK
	// exporter: it gets each span made into an SDK span (spanrec.ToSDK).
	SpanExporter sdktrace.SpanExporter
}

// Out is the exporter spans go to.
func (n Named) Out() Exporter {
	if n.Exporter != nil {
		return n.Exporter
	}
	return SDKExporter(n.SpanExporter)
}

// Shutdown shuts the exporter down.
func (n Named) Shutdown(ctx context.Context) error { return n.Out().Shutdown(ctx) }

// SDKExporter puts an SDK span exporter behind the Exporter interface.
func SDKExporter(e sdktrace.SpanExporter) Exporter { return sdkExporter{e} }

type sdkExporter struct{ e sdktrace.SpanExporter }

func (s sdkExporter) Export(ctx context.Context, spans []*spanrec.Span) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, sp := range spans {
		out[i] = spanrec.ToSDK(sp)
	}
	return s.e.ExportSpans(ctx, out)
}

func (s sdkExporter) Shutdown(ctx context.Context) error { return s.e.Shutdown(ctx) }
