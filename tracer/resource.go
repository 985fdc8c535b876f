package tracer

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/redact"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/spanschema"
)

// processResource describes the traced process, not specprobe: the spans are
// the target's. OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES still win.
// The command line goes on only when asked for (cmdline), since servers
// take API keys and tokens as arguments.
func processResource(pid int, engine string, cmdline redact.Mode, extra []attribute.KeyValue) *resource.Resource {
	host, _ := os.Hostname()
	attrs := []attribute.KeyValue{
		spanschema.KeyServiceName.String(engine),
		spanschema.KeyProcessPID.Int(pid),
		spanschema.KeyExecutableName.String(loader.Exe(pid)),
		spanschema.KeyHostName.String(host),
		attribute.String("telemetry.auto.name", "specprobe"),
	}
	if args, err := procfs.Cmdline(pid); err == nil {
		if line, ok := redact.CommandLine(args, cmdline); ok {
			attrs = append(attrs, spanschema.KeyCommandLine.String(line))
		}
	}
	attrs = append(attrs, extra...)
	base := resource.NewSchemaless(attrs...)
	env, err := resource.New(context.Background(), resource.WithFromEnv())
	if err != nil {
		return base
	}
	merged, err := resource.Merge(base, env)
	if err != nil {
		return base
	}
	return merged
}
