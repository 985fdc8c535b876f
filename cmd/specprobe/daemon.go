package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/specprobe/specprobe/daemon"
	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/k8smeta"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
)

func daemonCmd() *cobra.Command {
	var (
		configFile string
		flags      = daemon.Defaults()
		metricsExp string
	)
	cmd := &cobra.Command{
		Use:   "daemon [--config FILE] [flags]",
		Short: "Find inference servers on this node, trace each while it runs (fleet mode)",
		Example: `  sudo specprobe daemon --exporter otlp
  sudo specprobe daemon --config /etc/specprobe/config.yaml
  sudo specprobe daemon --engine llamacpp --probes mystack.yaml --exporter otlp-file --output spans.jsonl`,
		Long: `Scans /proc, then watches every execve on the node (a BPF tracepoint), and
attaches to each process that matches a probe spec: --probes files first, then
the catalog (--engine restricts it). A native server matches by executable,
command line or library; a Python one once it has imported its engine's module
(engines import their workers late: Python processes are re-examined every 2s).
Each target gets its own session, as with attach; it is detached when it exits
or execs, and everything is detached on SIGINT or SIGTERM.

Spans carry the process and, in Kubernetes, its pod as resource attributes
(k8s.pod.name, k8s.namespace.name, k8s.container.name, k8s.node.name,
container.id): the container from /proc/PID/cgroup, the names from the
kubelet's /pods (NODE_IP or kubelet.url; the service account token) and the
node from NODE_NAME.

Which processes: the config's select keys (uids, namespaces, pods,
cgroups) say which may be traced at all; at most --max-processes at once,
--max-per-uid of one user other than root (default 4: the node's other
users cannot take the slots of its servers), --max-per-pod of one pod.
Others wait for a slot. Each process is looked at on a worker, within a
deadline and a budget of reads of its memory: one built to make that
endless is skipped, counted by reason (specprobe_daemon_rejected_total),
and looked at again after a backoff.

Past --event-budget events per second over all targets new requests are
sampled, all spans of a request together, each span carrying
specprobe.sampling.rate; --memory-limit sizes the ring buffers, the bytes of
spans waiting for the exporters (past them spans are shed and counted: a
stalled collector costs spans, not memory) and the Go memory limit.
process.command_line is left off spans unless
--command-line says redacted or full.

Self-observability on --listen (localhost by default): /metrics
(Prometheus: attached processes, events, drops, spans, rejections,
estimated probe cost, sampling rate, memory), /healthz, /readyz, /targets
(JSON); --metrics-listen serves all but /targets on a second address (the
pod IP). The same metrics go out over OTLP with --metrics-exporter or when
spans go to OTLP.

Config file keys: listen, metrics_listen, exporters, output, probes,
engines, max_processes, max_per_uid, max_per_pod, select {uids, namespaces,
pods, cgroups}, command_line, flush_timeout, event_budget, memory_limit,
metrics_interval, kubelet {url, token_file, ca_file, insecure_skip_verify}.
Flags given on the command line win.`,
		RunE: func(cmd *cobra.Command, args []string) error { return runDaemon(cmd, configFile, metricsExp) },
	}
	f := cmd.Flags()
	f.StringVarP(&configFile, "config", "c", "", "config file (YAML; keys listed above)")
	bindDaemonFlags(f, &flags)
	f.StringVar(&metricsExp, "metrics-exporter", "", "where the daemon's metrics go besides /metrics: "+export.MetricNames()+" (default: OTLP when spans go to OTLP)")
	return cmd
}

// daemonConfig is the config file's settings with the command line's over
// them, checked.
func daemonConfig(cmd *cobra.Command, configFile string) (daemon.Config, error) {
	cfg := daemon.Defaults()
	if configFile != "" {
		var err error
		if cfg, err = daemon.LoadConfig(configFile); err != nil {
			return cfg, err
		}
	}
	overrideFlags(cmd, &cfg)
	return cfg, cfg.Validate()
}

func runDaemon(cmd *cobra.Command, configFile, metricsExp string) error {
	cfg, err := daemonConfig(cmd, configFile)
	if err != nil {
		return err
	}
	specs, err := daemonSpecs(cfg)
	if err != nil {
		return err
	}
	exps, closeFiles, err := export.Open(cmd.Context(), cfg.Exporters, cfg.Output, os.Stdout)
	if err != nil {
		return err
	}
	defer closeFiles()
	if len(exps) == 0 {
		fmt.Fprintln(os.Stderr, "specprobe daemon: no span exporter (--exporter, or OTEL_EXPORTER_OTLP_ENDPOINT): spans are counted, not sent")
	}
	var readers []sdkmetric.Reader
	if r, err := export.MetricReader(cmd.Context(), metricsExp, cfg.Exporters, sdkmetric.WithInterval(cfg.MetricsInterval)); err != nil {
		return err
	} else if r != nil {
		readers = append(readers, r)
	}
	meta, err := kubelet(cfg.Kubelet)
	if err != nil {
		return err
	}
	if err := loader.CheckPrivileges(); err != nil {
		return err
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Specs: specs, Exporters: exps, MetricReaders: readers,
		Meta: kubeMeta(meta), Log: os.Stderr})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return d.Run(ctx)
}

// kubelet is the resolver of pod names, with a warning where the kubelet's
// certificate goes unchecked.
func kubelet(c daemon.Kubelet) (*k8smeta.Resolver, error) {
	meta, err := k8smeta.NewResolver(k8smeta.Config{KubeletURL: c.URL, TokenFile: c.TokenFile,
		CAFile: c.CAFile, InsecureSkipVerify: c.InsecureSkipVerify})
	if err != nil {
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	if c.InsecureSkipVerify {
		fmt.Fprintln(os.Stderr, "specprobe daemon: warning: kubelet.insecure_skip_verify: the kubelet's certificate is not checked, so the service-account token goes to whoever answers at its address; give kubelet.ca_file instead")
	}
	return meta, nil
}

// overrideFlags copies the flags given on the command line over cfg: the
// same flags bound to cfg take the values the command line set.
func overrideFlags(cmd *cobra.Command, cfg *daemon.Config) {
	onCfg := pflag.NewFlagSet("config", pflag.ContinueOnError)
	bindDaemonFlags(onCfg, cfg)
	cmd.Flags().Visit(func(f *pflag.Flag) {
		dst := onCfg.Lookup(f.Name)
		if dst == nil {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			_ = dst.Value.(pflag.SliceValue).Replace(sv.GetSlice())
		} else {
			_ = dst.Value.Set(f.Value.String())
		}
	})
}

// bindDaemonFlags defines the flags that override config file keys. Each
// flag's default is c's value: binding must not reset what the file set.
func bindDaemonFlags(f *pflag.FlagSet, c *daemon.Config) {
	f.StringVar(&c.Listen, "listen", c.Listen, "HOST:PORT for /metrics, /healthz, /readyz, /targets")
	f.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "a second HOST:PORT for /metrics, /healthz and /readyz only (the pod IP)")
	f.StringArrayVar(&c.Exporters, "exporter", c.Exporters, "where spans go: "+export.Names()+"; NAME=PATH for files (repeatable)")
	f.StringVarP(&c.Output, "output", "o", c.Output, "output file of the file exporter")
	f.StringArrayVar(&c.Probes, "probes", c.Probes, "probe spec file matched before the catalog (repeatable)")
	f.StringArrayVar(&c.Engines, "engine", c.Engines, "catalog spec to use (repeatable; default: all)")
	f.IntVar(&c.MaxProcesses, "max-processes", c.MaxProcesses, "most processes traced at once")
	f.IntVar(&c.MaxPerUID, "max-per-uid", c.MaxPerUID, "most processes of one user other than root traced at once (0: no bound)")
	f.IntVar(&c.MaxPerPod, "max-per-pod", c.MaxPerPod, "most processes of one pod traced at once (0: no bound)")
	f.StringVar(&c.CommandLine, "command-line", c.CommandLine, "process.command_line on spans: off, redacted or full")
	f.DurationVar(&c.FlushTimeout, "flush-timeout", c.FlushTimeout, "how long a session's final export may take (then what is left counts as dropped)")
	f.IntVar(&c.EventBudget, "event-budget", c.EventBudget, "events per second over all targets beyond which requests are sampled (0: never sample)")
	f.StringVar(&c.MemoryLimit, "memory-limit", c.MemoryLimit, "what the daemon may use, e.g. 200MiB: sizes the ring buffers, the bytes of queued spans (past them spans are shed, counted) and the Go memory limit")
	f.DurationVar(&c.MetricsInterval, "metrics-interval", c.MetricsInterval, "OTLP metrics export interval")
	f.StringVar(&c.Kubelet.URL, "kubelet-url", c.Kubelet.URL, "kubelet to read pod names from (default https://$NODE_IP:10250 when NODE_IP is set)")
	f.BoolVar(&c.Kubelet.InsecureSkipVerify, "kubelet-insecure-skip-verify", c.Kubelet.InsecureSkipVerify, "do not verify the kubelet's serving certificate (often self-signed)")
}

// daemonSpecs are the user's spec files, then the catalog (or the engines named).
func daemonSpecs(cfg daemon.Config) ([]*probes.Spec, error) {
	var specs []*probes.Spec
	for _, f := range cfg.Probes {
		s, err := probes.Load(f)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	if len(cfg.Engines) > 0 {
		for _, e := range cfg.Engines {
			s, err := probes.Lookup(e)
			if err != nil {
				return nil, err
			}
			specs = append(specs, s)
		}
		return specs, nil
	}
	cat, err := probes.Catalog()
	if err != nil {
		return nil, err
	}
	return append(specs, cat...), nil
}

func kubeMeta(r *k8smeta.Resolver) func(context.Context, int) k8smeta.Info {
	var mu sync.Mutex // sessions start concurrently; one kubelet fetch at a time
	reported := ""
	return func(ctx context.Context, pid int) k8smeta.Info {
		mu.Lock()
		defer mu.Unlock()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		info := r.Lookup(ctx, pid)
		if err := r.Err(); err != nil && err.Error() != reported {
			reported = err.Error()
			fmt.Fprintf(os.Stderr, "specprobe daemon: kubelet: %v (pods are named by container id only)\n", err)
		}
		return info
	}
}
