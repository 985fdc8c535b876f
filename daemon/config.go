package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/specprobe/specprobe/internal/redact"
	"github.com/specprobe/specprobe/internal/safefile"
	"github.com/specprobe/specprobe/tracer"
)

// Config is the daemon's configuration file; flags override its fields.
type Config struct {
	// Listen is where /metrics, /healthz, /readyz and /targets are served.
	Listen string `yaml:"listen"`
	// MetricsListen, when set, serves /metrics, /healthz and /readyz there
	// too (the pod IP in Kubernetes, for Prometheus and the kubelet's
	// probes); /targets, which names what is traced, stays on Listen.
	MetricsListen string   `yaml:"metrics_listen"`
	Exporters     []string `yaml:"exporters"`
	Output        string   `yaml:"output"`
	// Probes are user spec files, matched before the catalog; Engines
	// restricts the catalog (default: every catalog spec).
	Probes  []string `yaml:"probes"`
	Engines []string `yaml:"engines"`
	// MaxProcesses bounds the processes traced at once; MaxPerUID those of
	// one user other than root (the node's servers run as root, its other
	// users must not take their slots), MaxPerPod those of one pod. 0: no
	// bound.
	MaxProcesses int `yaml:"max_processes"`
	MaxPerUID    int `yaml:"max_per_uid"`
	MaxPerPod    int `yaml:"max_per_pod"`
	// Select says which processes may be traced at all.
	Select Select `yaml:"select"`
	// CommandLine puts the target's command line on its spans
	// (process.command_line): off, redacted or full.
	CommandLine string `yaml:"command_line"`
	// FlushTimeout bounds the export of what is left when a session ends.
	FlushTimeout time.Duration `yaml:"flush_timeout"`
	// EventBudget is the events per second, over all targets, beyond which
	// requests are sampled (0: keep every request).
	EventBudget int `yaml:"event_budget"`
	// MemoryLimit is what the daemon may use ("200MiB"): its ring buffers,
	// the bytes of queued spans and the Go soft limit are sized from it
	// (memory.go); "" takes GOMEMLIMIT.
	MemoryLimit     string        `yaml:"memory_limit"`
	MetricsInterval time.Duration `yaml:"metrics_interval"`
	Kubelet         Kubelet       `yaml:"kubelet"`
}

// Select lists the processes that may be traced; an empty list allows
// every value, and a process must pass every list that is set.
type Select struct {
	UIDs       []int    `yaml:"uids"`       // real user ids
	Namespaces []string `yaml:"namespaces"` // Kubernetes namespaces (from the kubelet)
	Pods       []string `yaml:"pods"`       // pod name patterns (path.Match: vllm-*)
	Cgroups    []string `yaml:"cgroups"`    // cgroup path patterns (/kubepods.slice/*)
}

// Kubelet says where pod names come from (GET /pods on the node's kubelet).
type Kubelet struct {
	URL                string `yaml:"url"`
	TokenFile          string `yaml:"token_file"`
	CAFile             string `yaml:"ca_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Defaults are the values used where neither the file nor a flag sets one.
func Defaults() Config {
	return Config{Listen: "127.0.0.1:9464", MaxProcesses: 16, MaxPerUID: 4, CommandLine: string(redact.Off),
		FlushTimeout: tracer.DefaultFlushTimeout, MetricsInterval: 30 * time.Second}
}

// maxConfigBytes bounds the config file (a regular file: a FIFO or a device
// is refused before a byte is read).
const maxConfigBytes = 1 << 20

// LoadConfig reads a config file over the defaults. Unknown keys are errors,
// with the file and line, so a typo is not silently ignored.
func LoadConfig(path string) (Config, error) {
	data, err := safefile.ReadRegular(path, maxConfigBytes)
	if err != nil {
		return Defaults(), fmt.Errorf("reading the config: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig reads a config file's content; path names it in errors.
func ParseConfig(data []byte, path string) (Config, error) {
	cfg := Defaults()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return cfg, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		var msgs []string
		for _, m := range te.Errors {
			m = strings.Replace(m, " in type daemon.Config", " (not a config key)", 1)
			m = strings.Replace(m, " in type daemon.Kubelet", " (not a kubelet key)", 1)
			m = strings.Replace(m, " in type daemon.Select", " (not a select key)", 1)
			msgs = append(msgs, path+": "+m)
		}
		return cfg, errors.New(strings.Join(msgs, "\n"))
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Validate checks values a YAML type check lets through.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen %q: want HOST:PORT (e.g. 127.0.0.1:9464): %v", c.Listen, err)
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("metrics_listen %q: want HOST:PORT (e.g. 0.0.0.0:9464): %v", c.MetricsListen, err)
		}
	}
	if c.MaxProcesses < 1 {
		return fmt.Errorf("max_processes %d: want at least 1", c.MaxProcesses)
	}
	if c.MaxPerUID < 0 || c.MaxPerPod < 0 {
		return fmt.Errorf("max_per_uid %d, max_per_pod %d: want 0 (no bound) or more", c.MaxPerUID, c.MaxPerPod)
	}
	if _, err := redact.ParseMode(c.CommandLine); err != nil {
		return fmt.Errorf("command_line: %w", err)
	}
	if c.FlushTimeout <= 0 {
		return fmt.Errorf("flush_timeout %s: want a positive duration", c.FlushTimeout)
	}
	for _, p := range append(slices.Clone(c.Select.Pods), c.Select.Cgroups...) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("select: pattern %q: %v", p, err)
		}
	}
	if c.EventBudget < 0 {
		return fmt.Errorf("event_budget %d: want 0 (no sampling) or more", c.EventBudget)
	}
	if c.MetricsInterval < time.Second {
		return fmt.Errorf("metrics_interval %s: want at least 1s", c.MetricsInterval)
	}
	if _, err := ParseSize(c.MemoryLimit); err != nil {
		return fmt.Errorf("memory_limit: %w", err)
	}
	return nil
}

// ParseSize reads "256MiB", "1GiB", "500M", "1048576"; "" is 0.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"B", 1}}
	mult := int64(1)
	num := s
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. 256MiB, 1GiB)", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}
