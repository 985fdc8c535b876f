package tracer

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanschema"
)

// A thread span names the ranks the process's spec reads from its title
// (probes.TestCatalogRanks has the titles); SGLang's always has a TP rank.
func TestThreadRanks(t *testing.T) {
	no := spanschema.NoRank
	for _, c := range []struct {
		engine, title string
		tp, pp, dp    int
	}{
		{"sglang", "sglang::scheduler", 0, no, no},
		{"sglang", "sglang::scheduler_DP2_PP1_TP3", 3, 1, 2},
		{"sglang", "sglang::scheduler_DP1", 0, no, 1},
		{"vllm", "VLLM::Worker_DP1_TP1", 1, no, 1},
		{"vllm", "VLLM::EngineCore", 0, no, no},
		{"llamacpp", "llama-server", no, no, no},
	} {
		spec, err := probes.Lookup(c.engine)
		if err != nil {
			t.Fatal(err)
		}
		ranks, err := spec.Match.RanksOf(c.title)
		if err != nil {
			t.Fatal(err)
		}
		th := newThreadLabels(os.Getpid(), spec, ranks).thread(1, 2)
		if th.TP != c.tp || th.PP != c.pp || th.DP != c.dp {
			t.Errorf("%s %q: TP %d PP %d DP %d, want %d %d %d", c.engine, c.title, th.TP, th.PP, th.DP, c.tp, c.pp, c.dp)
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
	th := newThreadLabels(pid, lookup(t, "sglang-ngram"), nil).thread(uint32(pid), 77)
	if th.Label != "Scheduler" || th.TID != 77 || th.TP != 0 || th.DP != spanschema.NoRank || th.PP != spanschema.NoRank || th.HostID == "" {
		t.Errorf("SGLang thread: %+v", th)
	}
	// Another engine's thread is labelled with its name, read while it
	// runs and kept for when its last spans are made after it is gone.
	l := newThreadLabels(pid, lookup(t, "llamacpp"), nil)
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

func lookup(t *testing.T, engine string) *probes.Spec {
	t.Helper()
	spec, err := probes.Lookup(engine)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// Every SGLang spec of the catalog labels its threads as SGLang does, and
// no other engine's does: the label comes from the spec, not its name.
func TestCatalogThreadLabels(t *testing.T) {
	specs, err := probes.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range specs {
		want := ""
		if strings.HasPrefix(spec.Engine, "sglang") {
			want = "Scheduler"
		}
		if spec.ThreadLabel != want {
			t.Errorf("%s: thread_label %q, want %q", spec.Engine, spec.ThreadLabel, want)
		}
	}
	custom := &probes.Spec{Engine: "sglang-lookalike"}
	if th := newThreadLabels(os.Getpid(), custom, nil).thread(1, uint32(os.Getpid())); th.Label == "Scheduler" || th.TP != spanschema.NoRank {
		t.Errorf("a spec without thread_label named like SGLang got SGLang's label: %+v", th)
	}
}

// Threads with a call open are checked for exit at every drain; every
// thread whose state is kept (the builder's, the Python side's) once a
// sweepEvery.
func TestCheckedThreads(t *testing.T) {
	b := spanbuilder.New([]spanbuilder.Site{{Stage: "verify", Batch: true}}, spanbuilder.Clock{}, discard{})
	for _, e := range []spanbuilder.Event{{PID: 7, TID: 4}, {PID: 7, TID: 9}, {PID: 7, TID: 9, Exit: true}, {PID: 8, TID: 5}} {
		b.Add(&e)
	}
	p := &procTrace{pid: 7, py: &pySession{slots: map[uint32]bool{3: true, 9: true}}}
	open := b.OpenThreads(7)
	for _, c := range []struct {
		name  string
		swept time.Time
		py    bool
		want  []uint32
	}{
		{"first drain: all", time.Time{}, true, []uint32{3, 4, 9}},
		{"within a second: open only", time.Now(), true, []uint32{4}},
		{"a second on: all", time.Now().Add(-sweepEvery), true, []uint32{3, 4, 9}},
		{"no Python stage", time.Time{}, false, []uint32{4, 9}},
	} {
		p.swept = c.swept
		if !c.py {
			p.py = nil
		}
		if got := p.checked(open, b); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
