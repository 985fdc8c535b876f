package tracer

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/redact"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanschema"
)

// processResource describes the traced process, not specprobe: the spans are
// the target's. OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES still win.
// The command line goes on only when asked for (cfg.CommandLine), since
// servers take API keys and tokens as arguments; the ranks its spec names
// resource attributes for go on (sglang.tp_rank).
func processResource(cfg Config, ranks []probes.RankValue) *resource.Resource {
	pid, cmdline := cfg.PID, cfg.CommandLine
	host, _ := os.Hostname()
	attrs := []attribute.KeyValue{
		spanschema.KeyServiceName.String(cfg.Spec.Engine),
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
	for _, r := range ranks {
		if r.Rank.Attribute != "" {
			attrs = append(attrs, attribute.Int(r.Rank.Attribute, r.Value))
		}
	}
	attrs = append(attrs, cfg.Resource...)
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

// processRanks are the process's ranks as its spec reads them from its
// title (match.ranks); none when the title names a rank it cannot read.
func processRanks(pid int, spec *probes.Spec) []probes.RankValue {
	args, _ := procfs.Cmdline(pid)
	ranks, err := spec.Match.RanksOf(probes.Title(args))
	if err != nil {
		return nil
	}
	return ranks
}
