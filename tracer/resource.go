package tracer

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/specprobe/specprobe/loader"
)

// processResource describes the traced process, not specprobe: the spans are
// the target's. OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES still win.
func processResource(pid int, engine string, extra []attribute.KeyValue) *resource.Resource {
	host, _ := os.Hostname()
	attrs := []attribute.KeyValue{
		attribute.String("service.name", engine),
		attribute.Int("process.pid", pid),
		attribute.String("process.executable.name", loader.Exe(pid)),
		attribute.String("process.command_line", loader.Cmdline(pid)),
		attribute.String("host.name", host),
		attribute.String("telemetry.auto.name", "specprobe"),
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
