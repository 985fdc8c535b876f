package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/specprobe/specprobe/daemon"
)

// TestDaemonFlagsOverFile: a flag given on the command line wins over the
// config file; every key the command line does not name keeps the file's value.
func TestDaemonFlagsOverFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(`listen: 0.0.0.0:9000
exporters: [otlp]
output: spans.jsonl
probes: [a.yaml]
engines: [sglang]
max_processes: 4
event_budget: 200000
memory_limit: 200MiB
metrics_interval: 15s
kubelet: {url: "https://10.0.0.1:10250", insecure_skip_verify: true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := daemonCmd()
	if err := cmd.ParseFlags([]string{"--config", file, "--max-processes", "9", "--engine", "llamacpp", "--engine", "demo"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := daemon.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	overrideFlags(cmd, &cfg)
	want := daemon.Config{Listen: "0.0.0.0:9000", Exporters: []string{"otlp"}, Output: "spans.jsonl", Probes: []string{"a.yaml"},
		Engines: []string{"llamacpp", "demo"}, MaxProcesses: 9, EventBudget: 200000, MemoryLimit: "200MiB",
		MetricsInterval: 15 * time.Second, Kubelet: daemon.Kubelet{URL: "https://10.0.0.1:10250", InsecureSkipVerify: true}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config after flags:\n got %+v\nwant %+v", cfg, want)
	}
}
