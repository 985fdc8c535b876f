package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/tracer"
)

// buildExporters turns --exporter values into exporters; the returned func
// closes the files they write.
func buildExporters(ctx context.Context, names []string, output string) ([]tracer.Exporter, func(), error) {
	if len(names) == 0 && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		names = []string{"otlp"}
	}
	fileExporters := 0
	for _, n := range names {
		if name, _, _ := strings.Cut(n, "="); name == "otlp-file" || name == "perfetto" {
			fileExporters++
		}
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	var out []tracer.Exporter
	for _, n := range names {
		name, path, hasPath := strings.Cut(n, "=")
		var exp sdktrace.SpanExporter
		var err error
		switch name {
		case "otlp", "otlp-grpc", "otlp-http":
			proto := map[string]string{"otlp": "", "otlp-grpc": "grpc", "otlp-http": "http/protobuf"}[name]
			exp, err = export.NewOTLP(ctx, proto)
		case "console":
			exp = export.NewConsole(os.Stdout)
		case "otlp-file", "perfetto":
			if !hasPath {
				if output == "" || fileExporters > 1 {
					closeAll()
					return nil, nil, fmt.Errorf("--exporter %s needs a file: give --output FILE, or %s=FILE when several file exporters are used", name, name)
				}
				path = output
			}
			var f *os.File
			f, err = os.Create(path)
			if err != nil {
				break
			}
			files = append(files, f)
			if name == "perfetto" {
				exp = export.NewPerfetto(f)
			} else {
				exp = export.NewOTLPFile(f)
			}
		default:
			closeAll()
			return nil, nil, fmt.Errorf("unknown exporter %q (have: otlp, otlp-grpc, otlp-http, otlp-file, perfetto, console)", name)
		}
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("exporter %s: %w", name, err)
		}
		out = append(out, tracer.Exporter{Name: name, SpanExporter: exp})
	}
	return out, closeAll, nil
}
