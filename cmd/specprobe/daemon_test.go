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
max_per_uid: 2
command_line: redacted
flush_timeout: 3s
select: {uids: [0], namespaces: [inference]}
kubelet: {url: "https://10.0.0.1:10250", ca_file: /etc/ca.crt}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := daemonCmd()
	if err := cmd.ParseFlags([]string{"--config", file, "--max-processes", "9", "--engine", "llamacpp", "--engine", "demo",
		"--max-per-pod", "3", "--command-line", "full"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := daemon.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	overrideFlags(cmd, &cfg)
	want := daemon.Config{Listen: "0.0.0.0:9000", Exporters: []string{"otlp"}, Output: "spans.jsonl", Probes: []string{"a.yaml"},
		Engines: []string{"llamacpp", "demo"}, MaxProcesses: 9, MaxPerUID: 2, MaxPerPod: 3, CommandLine: "full", FlushTimeout: 3 * time.Second,
		Select:      daemon.Select{UIDs: []int{0}, Namespaces: []string{"inference"}},
		EventBudget: 200000, MemoryLimit: "200MiB",
		MetricsInterval: 15 * time.Second, Kubelet: daemon.Kubelet{URL: "https://10.0.0.1:10250", CAFile: "/etc/ca.crt"}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config after flags:\n got %+v\nwant %+v", cfg, want)
	}
}
