package export

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/specprobe/specprobe/internal/safefile"
)

// Kinds are the exporters --exporter names, in the order --help lists them.
// Adding one is a file with its constructor and a line here.
var Kinds = []Kind{
	{Name: "otlp", OTLP: true, Help: "OTLP to a collector; protocol, endpoint and headers from the standard OTEL_EXPORTER_OTLP_* variables (default grpc, localhost:4317)"},
	{Name: "otlp-grpc", OTLP: true, Protocol: ProtocolGRPC, Help: "OTLP over gRPC"},
	{Name: "otlp-http", OTLP: true, Protocol: ProtocolHTTPProtobuf, Help: "OTLP over HTTP/protobuf"},
	{Name: "otlp-file", File: true, Help: "OTLP JSON lines, one ExportTraceServiceRequest per line (the Collector file exporter's format)",
		New: func(_ context.Context, o Output) (Exporter, error) { return NewOTLPFile(o.File), nil }},
	{Name: "perfetto", File: true, Help: "Chrome/Perfetto trace JSON, one track per thread (ui.perfetto.dev)",
		New: func(_ context.Context, o Output) (Exporter, error) { return NewPerfetto(o.File), nil }},
	{Name: "console", Help: "one line per stage span on stdout",
		New: func(_ context.Context, o Output) (Exporter, error) { return NewConsole(o.Stdout), nil }},
}

// Kind is one exporter --exporter can name.
type Kind struct {
	Name string
	Help string // one line for --help
	// File: it writes a file, named by NAME=PATH or --output.
	File bool
	// OTLP kinds send to a collector; the same names choose the metrics
	// exporter (--metrics-exporter), over Protocol ("" takes it from
	// OTEL_EXPORTER_OTLP_*: see NewOTLP). Their constructor is NewOTLP.
	OTLP     bool
	Protocol string
	New      func(ctx context.Context, out Output) (Exporter, error)
}

// Output is where an exporter writes: its file (file kinds), stdout.
type Output struct {
	File   io.WriteCloser
	Stdout io.Writer
}

// Lookup finds a kind by name.
func Lookup(name string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Names lists the kinds, for messages and flag help: "otlp, otlp-grpc, …".
func Names() string {
	var out []string
	for _, k := range Kinds {
		out = append(out, k.Name)
	}
	return strings.Join(out, ", ")
}

// Help lists the kinds with what each does, for a command's long help:
// each help wrapped to 80 columns beside its name.
func Help() string {
	var b strings.Builder
	for _, k := range Kinds {
		line := fmt.Sprintf("  %-11s", k.Name)
		for _, w := range strings.Fields(k.Help) {
			if len(line)+1+len(w) > 79 && len(line) > 14 {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", 13)
			}
			line += " " + w
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func (k Kind) open(ctx context.Context, out Output) (Exporter, error) {
	if k.OTLP {
		return NewOTLP(ctx, k.Protocol)
	}
	return k.New(ctx, out)
}

// Open builds the exporters --exporter names (NAME or NAME=PATH); a file
// kind without a path writes to output, when it is the only one. Without
// names, spans go to OTLP when an OTLP endpoint is set in the environment.
// close closes the files they write.
func Open(ctx context.Context, names []string, output string, stdout io.Writer) (exps []Named, close func(), err error) {
	if len(names) == 0 && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		names = []string{"otlp"}
	}
	fileKinds := 0
	for _, n := range names {
		name, _, _ := strings.Cut(n, "=")
		if k, ok := Lookup(name); ok && k.File {
			fileKinds++
		}
	}
	var files []*os.File
	close = func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, n := range names {
		name, path, hasPath := strings.Cut(n, "=")
		k, ok := Lookup(name)
		if !ok {
			close()
			return nil, nil, fmt.Errorf("unknown exporter %q (have: %s)", name, Names())
		}
		out := Output{Stdout: stdout}
		if k.File {
			if !hasPath {
				if output == "" || fileKinds > 1 {
					close()
					return nil, nil, fmt.Errorf("--exporter %s needs a file: give --output FILE, or %s=FILE when several file exporters are used", name, name)
				}
				path = output
			}
			// specprobe runs as root, often with output in a directory
			// other users can write: see safefile.Create.
			f, err := safefile.Create(path)
			if err != nil {
				close()
				return nil, nil, fmt.Errorf("exporter %s: %w", name, err)
			}
			files = append(files, f)
			out.File = f
		}
		exp, err := k.open(ctx, out)
		if err != nil {
			close()
			return nil, nil, fmt.Errorf("exporter %s: %w", name, err)
		}
		exps = append(exps, Named{Name: name, Exporter: exp})
	}
	return exps, close, nil
}

// MetricNames lists what --metrics-exporter takes.
func MetricNames() string {
	var out []string
	for _, k := range Kinds {
		if k.OTLP {
			out = append(out, k.Name)
		}
	}
	return strings.Join(append(out, "none"), ", ")
}

// MetricReader is the OTLP metric reader that name (an OTLP kind, or
// "none") asks for. With name "", metrics follow the spans: OTLP with the
// last OTLP kind among spanExporters, else OTLP when an OTLP endpoint is set
// in the environment; nil for none.
func MetricReader(ctx context.Context, name string, spanExporters []string, opts ...sdkmetric.PeriodicReaderOption) (sdkmetric.Reader, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		for _, e := range spanExporters {
			if k, ok := Lookup(e); ok && k.OTLP {
				name = e
			}
		}
		if name == "" && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "") {
			name = "otlp"
		}
	}
	if name == "" || name == "none" {
		return nil, nil
	}
	k, ok := Lookup(name)
	if !ok || !k.OTLP {
		return nil, fmt.Errorf("unknown metrics exporter %q (have: %s)", name, MetricNames())
	}
	r, err := NewOTLPMetricReader(ctx, k.Protocol, opts...)
	if err != nil {
		return nil, fmt.Errorf("metrics exporter %s: %w", name, err)
	}
	return r, nil
}
