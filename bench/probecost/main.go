// Command probecost measures what specprobe's entry+exit probes cost the
// traced process per call, side by side with the bare call and with empty BPF
// programs on the same instruction, with and without the endbr64 skip.
// Configurations are interleaved round by round so machine noise hits all
// of them alike. Needs root.
package main

import (
	"bufio"
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
}

var configs = []config{
	{"bare call (no probe)", "", false},
	{"empty BPF program, after endbr64", "bare", true},
	{"specprobe, after endbr64 (default)", "specprobe", true},
	{"empty BPF program, on endbr64", "bare", false},
	{"specprobe, on endbr64 (--no-endbr-skip)", "specprobe", false},
}

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
	flag.Parse()
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
	fmt.Println("| configuration | ns/call | cost per hit (ns) |")
	fmt.Println("|---|---|---|")
	for _, c := range configs {
		m := med(c.name)
		fmt.Printf("| %s | %.1f | %.1f |\n", c.name, m, (m-base)/2)
	}
	hit := func(i int) float64 { return (med(configs[i].name) - base) / 2 }
	fmt.Println()
	fmt.Printf("specprobe / empty program, after endbr64:   %.2fx\n", hit(2)/hit(1))
	fmt.Printf("specprobe / empty program, on endbr64:      %.2fx\n", hit(4)/hit(3))
	fmt.Printf("on endbr64 / after endbr64 (specprobe):     %.2fx  (the single-step penalty the skip removes)\n", hit(4)/hit(2))
	fmt.Printf("specprobe call / bare call:                 %.2fx\n", med(configs[2].name)/base)
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
		closer, err = benchprobes.AttachBare(targets[0].File.Open, targets[0].Offset, pid, true)
		if err != nil {
			return 0, err
		}
	case "specprobe":
		targets, err := loader.Resolve(pid, spec(binary), c.skip)
		if err != nil {
			return 0, err
		}
		sess, err := loader.Attach(pid, targets, loader.Options{WakeupBytes: wake, RingBytes: ring})
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
