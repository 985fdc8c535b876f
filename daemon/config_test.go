package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
listen: 0.0.0.0:9000
exporters: [otlp, otlp-file=/tmp/x.jsonl]
probes: [/etc/specprobe/mine.yaml]
engines: [llamacpp]
max_processes: 4
event_budget: 50000
memory_limit: 200MiB
metrics_interval: 15s
kubelet:
  url: https://10.0.0.5:10250
  insecure_skip_verify: true
`), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "0.0.0.0:9000" || len(cfg.Exporters) != 2 || cfg.MaxProcesses != 4 || cfg.EventBudget != 50000 ||
		cfg.MetricsInterval != 15*time.Second || cfg.Kubelet.URL != "https://10.0.0.5:10250" || !cfg.Kubelet.InsecureSkipVerify {
		t.Errorf("parsed %+v", cfg)
	}
	// Keys left out keep their defaults.
	cfg, err = ParseConfig([]byte("event_budget: 10\n"), "c.yaml")
	if err != nil || cfg.Listen != Defaults().Listen || cfg.MaxProcesses != Defaults().MaxProcesses {
		t.Errorf("defaults not kept: %+v %v", cfg, err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"max_procs: 3\n", "c.yaml: line 1: field max_procs not found"},
		{"listen: 9464\n", `listen "9464": want HOST:PORT`},
		{"max_processes: 0\n", "max_processes 0: want at least 1"},
		{"event_budget: -5\n", "event_budget -5"},
		{"memory_limit: lots\n", `memory_limit: "lots" is not a size`},
		{"metrics_interval: 10ms\n", "metrics_interval 10ms: want at least 1s"},
		{"metrics_interval: -30s\n", "metrics_interval -30s: want at least 1s"},
		{"flush_timeout: -1s\n", "flush_timeout -1s: want a positive duration"},
		{"max_processes: many\n", "c.yaml: line 1: cannot unmarshal"},
		{"kubelet:\n  url: x\n  token: y\n", "line 3: field token not found"},
	} {
		_, err := ParseConfig([]byte(c.yaml), "c.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to say %q", c.yaml, err, c.want)
		}
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing file: %v", err)
	}
	// A FIFO would block the daemon's start and /dev/zero exhaust its memory.
	fifo := filepath.Join(t.TempDir(), "config.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "FIFO", "/dev/zero": "character device"} {
		if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadConfig(%s) = %v, want it refused as a %s", path, err, want)
		}
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "1048576": 1 << 20, "256MiB": 256 << 20, "1GiB": 1 << 30, "512Mi": 512 << 20, "500M": 500e6, "2 GB": 2e9} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "MiB", "1.5GiB", "99999999999999999GiB", "12XB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("listen: 127.0.0.1:1\nmax_processes: 2\nmemory_limit: 1GiB\n"))
	f.Add([]byte("kubelet: {url: x}\nexporters: [a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data, "fuzz.yaml")
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("accepted a config that does not validate: %v", verr)
			}
		}
	})
}
