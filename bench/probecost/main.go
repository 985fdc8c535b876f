// Command probecost measures what specprobe's entry+exit probes cost the
// traced process per call, side by side with the bare call and with empty BPF
// programs on the same instruction, with and without the endbr64 skip.
// Configurations are interleaved round by round so machine noise hits all
// of them alike. Needs root.
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/internal/benchprobes"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
)

type config struct {
	name  string
	probe string // "", "bare" or "specprobe"
	skip  bool   // probe after endbr64
	omit  uint32 // parts of the stage programs left out (bpf/stage.c OMIT_*)
	ring  uint32 // ring-buffer bytes, 0: -ring-bytes or the default
}

// bpf/stage.c's OMIT_* bits.
const (
	omitWakeup = 1
	omitTime   = 2
	omitValues = 4
	omitRing   = 8
)

var configs = []config{
	{"bare call (no probe)", "", false, 0, 0},
	{"empty BPF program, after endbr64", "bare", true, 0, 0},
	{"specprobe, after endbr64 (default)", "specprobe", true, 0, 0},
	{"empty BPF program, on endbr64", "bare", false, 0, 0},
	{"specprobe, on endbr64 (--no-endbr-skip)", "specprobe", false, 0, 0},
}

// parts leave one part of the stage programs out after another: the
// differences between neighbours are what each part costs a hit.
// Their ring holds a whole measurement's events: without wakeups the
// reader drains only on its timer, and a full ring's drops would make a
// row cheaper than what it measures.
var parts = []config{
	{"specprobe, 32 MiB ring (as the rows below)", "specprobe", true, 0, partsRing},
	{"  ... without the wakeup decision (reader drains on its timer)", "specprobe", true, omitWakeup, partsRing},
	{"  ... and without the timestamp", "specprobe", true, omitWakeup | omitTime, partsRing},
	{"  ... and without the value reads", "specprobe", true, omitWakeup | omitTime | omitValues, partsRing},
	{"  ... and without the record (cookie and site lookup only)", "specprobe", true, omitRing, partsRing},
}

const partsRing = 32 << 20

// runtimes holds, per configuration, the programs' own run time per run
// (kernel BPF statistics), when they are enabled.
var runtimes = map[string][]float64{}

var (
	wake      uint64
	ring      uint32
	pinTarget int
)

func main() {
	flag.IntVar(&pinTarget, "pin-target", -1, "run the target on this CPU (run probecost itself elsewhere, e.g. with taskset)")
	flag.Uint64Var(&wake, "wakeup-bytes", 0, "ring-buffer bytes waiting before the reader is woken (0: the default)")
	flag.Func("ring-bytes", "ring-buffer size, a power of 2 (default 4 MiB)", func(s string) error { n, err := strconv.ParseUint(s, 0, 32); ring = uint32(n); return err })
	binary := flag.String("target", "bench/callloop", "the call-loop binary")
	calls := flag.Int("calls", 20000, "calls per measurement")
	rounds := flag.Int("rounds", 5, "measurements per configuration")
	withParts := flag.Bool("parts", true, "also measure the stage programs with parts left out")
	flag.Parse()
	if *withParts {
		configs = append(configs, parts...)
	}
	if err := loader.CheckPrivileges(); err != nil {
		fmt.Fprintln(os.Stderr, "probecost:", err)
		os.Exit(1)
	}
	results := map[string][]float64{}
	for r := 0; r < *rounds; r++ {
		for i := range configs {
			c := configs[(i+r)%len(configs)]
			ns, err := measure(*binary, *calls, c)
			if err != nil {
				fmt.Fprintf(os.Stderr, "probecost: %s: %v\n", c.name, err)
				os.Exit(1)
			}
			results[c.name] = append(results[c.name], ns)
		}
	}
	med := func(name string) float64 { return median(results[name]) }
	base := med(configs[0].name)
	fmt.Printf("%d calls x %d rounds, medians; cost per hit = (ns/call - bare call) / 2 (entry + exit)\n\n", *calls, *rounds)
	stats := statsEnabled()
	if stats {
		fmt.Println("kernel.bpf_stats_enabled is on: every program run also pays for its statistics (both sides of each ratio)")
	}
	fmt.Println("| configuration | ns/call | cost per hit (ns) | program run time per hit (ns, bpf_stats) |")
	fmt.Println("|---|---|---|---|")
	for _, c := range configs {
		m := med(c.name)
		rt := "–"
		if len(runtimes[c.name]) > 0 {
			rt = fmt.Sprintf("%.1f", median(runtimes[c.name]))
		}
		fmt.Printf("| %s | %.1f | %.1f | %s |\n", c.name, m, (m-base)/2, rt)
	}
	hit := func(i int) float64 { return (med(configs[i].name) - base) / 2 }
	fmt.Println()
	fmt.Printf("specprobe / empty program, after endbr64:   %.2fx\n", hit(2)/hit(1))
	fmt.Printf("specprobe / empty program, on endbr64:      %.2fx\n", hit(4)/hit(3))
	fmt.Printf("on endbr64 / after endbr64 (specprobe):     %.2fx  (the single-step penalty the skip removes)\n", hit(4)/hit(2))
	fmt.Printf("specprobe call / bare call:                 %.2fx\n", med(configs[2].name)/base)
	if *withParts {
		fmt.Println()
		fmt.Println("what each part of stage_entry/stage_exit costs a hit (difference of neighbouring rows):")
		fmt.Println("(wall clock: cost per hit; program: its run time per hit from bpf_stats, steadier)")
		part := func(what string, a, b string) {
			prog := "–"
			if len(runtimes[a]) > 0 && len(runtimes[b]) > 0 {
				prog = fmt.Sprintf("%6.1f ns", median(runtimes[a])-median(runtimes[b]))
			}
			fmt.Printf("  %-52s wall %6.1f ns, program %s\n", what+":", (med(a)-med(b))/2, prog)
		}
		part("the wakeup decision", parts[0].name, parts[1].name)
		part("the timestamp (bpf_ktime_get_boot_ns)", parts[1].name, parts[2].name)
		part("the value reads (two registers)", parts[2].name, parts[3].name)
		part("the record (reserve, fill, submit)", parts[3].name, parts[4].name)
		part("cookie and site lookup, over the empty program", parts[4].name, configs[1].name)
	}
}

// statsEnabled tells whether the kernel keeps BPF run-time statistics.
func statsEnabled() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

func measure(binary string, calls int, c config) (float64, error) {
	cmd := exec.Command(binary, strconv.Itoa(calls))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		return 0, fmt.Errorf("target not ready: %q %v", line, err)
	}
	pid := cmd.Process.Pid
	if pinTarget >= 0 {
		// Keep the target off the CPU the reader runs on, so the numbers
		// are the probe's cost, not the reader's competition for a core.
		var set unix.CPUSet
		set.Set(pinTarget)
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			return 0, fmt.Errorf("pinning the target to CPU %d: %w", pinTarget, err)
		}
	}
	var closer io.Closer
	switch c.probe {
	case "bare":
		targets, err := loader.Resolve(pid, spec(binary), c.skip)
		if err != nil {
			return 0, err
		}
		b, err := benchprobes.AttachBare(targets[0].File.Open, targets[0].Offset, pid, true)
		if err != nil {
			return 0, err
		}
		closer = closerFunc(func() error {
			runs, total := benchprobes.Runtime(b)
			record(c.name, runs, total)
			return b.Close()
		})
	case "specprobe":
		targets, err := loader.Resolve(pid, spec(binary), c.skip)
		if err != nil {
			return 0, err
		}
		sess, err := loader.Attach(pid, targets, loader.Options{WakeupBytes: wake, RingBytes: cmp.Or(c.ring, ring), BenchOmit: c.omit})
		if err != nil {
			return 0, err
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		events := 0
		go func() {
			defer close(done)
			_, _ = sess.Run(stop, 100*time.Millisecond, func(*spanbuilder.Event) { events++ }, func() {})
		}()
		closer = closerFunc(func() error {
			close(stop)
			<-done
			runs, total := sess.ProgramRuntime()
			record(c.name, runs, total)
			if drops := sess.Drops(); drops > 0 {
				fmt.Fprintf(os.Stderr, "probecost: %s: %d events dropped of %d\n", c.name, drops, events)
			}
			return sess.Close()
		})
	}
	fmt.Fprintln(stdin, "go")
	line, err := out.ReadString('\n')
	if closer != nil {
		closer.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("reading the result: %v", err)
	}
	return strconv.ParseFloat(strings.Fields(line)[0], 64)
}

func record(name string, runs uint64, total time.Duration) {
	if runs > 0 && total > 0 {
		runtimes[name] = append(runtimes[name], float64(total.Nanoseconds())/float64(runs))
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// spec probes bench_stage the way a real spec probes a stage: an integer
// request id at entry and the return value at exit.
func spec(binary string) *probes.Spec {
	return &probes.Spec{Engine: "bench", File: "probecost", Stages: map[string]*probes.Stage{
		probes.Verify: {
			Name: probes.Verify, Binary: []string{binary[strings.LastIndex(binary, "/")+1:]}, Symbol: "bench_stage", Scope: probes.ScopeRequest,
			RequestID: &probes.Value{At: probes.Entry, From: 0, Size: 4},
			Values:    map[string]*probes.Value{"result": {At: probes.Exit, From: probes.SourceRet, Size: 4}},
		},
	}}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
