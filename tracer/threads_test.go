package tracer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/spanschema"
)

func TestSGLangRanks(t *testing.T) {
	no := spanschema.NoRank
	for _, c := range []struct {
		title  string
		tp, dp int
	}{
		{"sglang::scheduler", 0, no},
		{"sglang::scheduler_TP1", 1, no},
		{"sglang::scheduler_DP2_TP3", 3, 2},
		{"sglang::scheduler_DP0_PP1_TP2_EP0", 2, 0},
		{"sglang::scheduler_DP1", 0, 1},
		{"sglang::scheduler_TP1 --model x_TP9", 1, no}, // only the title, not what follows it
		{"python3 -m sglang.launch_server_TP4", 0, no}, // not a scheduler's title
		{"sglang::scheduler_TP99999999", 0, no},        // no rank has that many digits
		{"", 0, no},
	} {
		tp, dp := sglangRanks(c.title)
		if tp != c.tp || dp != c.dp {
			t.Errorf("sglangRanks(%q) = TP %d DP %d, want %d %d", c.title, tp, dp, c.tp, c.dp)
		}
	}
}

func TestMachineID(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content string
		ok      bool
	}{
		{"0123456789abcdef0123456789abcdef\n", true},
		{"0123456789ABCDEF", true},
		{"", false},
		{"abc", false},                 // too short to be an id
		{"0123456789abcdefXYZ", false}, // not hex
		{"0123456789abcdef\x1b[2J", false},
		{string(make([]byte, 4096)), false},
	} {
		p := filepath.Join(dir, "machine-id")
		if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		id, ok := readMachineID(p)
		if ok != c.ok {
			t.Errorf("readMachineID(%q) = %q, %v, want ok %v", c.content, id, ok, c.ok)
		}
	}
	if _, ok := readMachineID(filepath.Join(dir, "none")); ok {
		t.Error("a missing file gave an id")
	}
}

func TestThreadLabels(t *testing.T) {
	pid := os.Getpid()
	th := newThreadLabels(pid, "sglang-ngram").thread(uint32(pid), 77)
	if th.Label != "Scheduler" || th.TID != 77 || th.TP != 0 || th.DP != spanschema.NoRank || th.PP != spanschema.NoRank || th.HostID == "" {
		t.Errorf("SGLang thread: %+v", th)
	}
	// Another engine's thread is labelled with its name, read while it
	// runs and kept for when its last spans are made after it is gone.
	l := newThreadLabels(pid, "llamacpp")
	l.see([]uint32{uint32(pid)})
	if got := l.names[uint32(pid)]; got == "" || strings.HasPrefix(got, "thread ") {
		t.Fatalf("see read %q for this process's main thread", got)
	}
	l.names[uint32(pid)] = "seen-earlier" // what see read stays
	th = l.thread(uint32(pid), uint32(pid))
	if th.Label != "seen-earlier" || th.TP != spanschema.NoRank {
		t.Errorf("llama.cpp thread: %+v", th)
	}
	if th := l.thread(uint32(pid), 1<<30); th.Label != "thread 1073741824" {
		t.Errorf("a thread never seen alive: %+v", th)
	}
}
