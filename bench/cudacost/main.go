// Command cudacost measures what specprobe's CUDA driver probes cost the
// traced process per call: bench/cudaloop's launches and syncs against the
// stand-in driver (integration/testdata/fakecuda.c, no queued work, so a
// sync returns at once), unprobed, with every CUDA probe, and with the
// syncs only (--cuda-launches=false). Configurations are interleaved round
// by round so machine noise hits all of them alike. Needs root and gcc.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/internal/benchprobes"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/spanbuilder"
)

type config struct {
	name     string
	probe    bool
	launches bool
	bare     bool // empty BPF programs at entry and return of both functions
}

var configs = []config{
	{"unprobed", false, false, false},
	{"CUDA probes (default)", true, true, false},
	{"syncs only (--cuda-launches=false)", true, false, false},
	{"empty BPF programs, entry and return of both", false, false, true},
}

var pinTarget int

func main() {
	flag.IntVar(&pinTarget, "pin-target", -1, "run the target on this CPU (run cudacost itself elsewhere, e.g. with taskset)")
	calls := flag.Int("calls", 50000, "launches and syncs per measurement")
	rounds := flag.Int("rounds", 5, "measurements per configuration")
	flag.Parse()
	if err := loader.CheckPrivileges(); err != nil {
		fail(err)
	}
	bin, err := build()
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(filepath.Dir(bin))
	launch, sync := map[string][]float64{}, map[string][]float64{}
	for r := 0; r < *rounds; r++ {
		for i := range configs {
			c := configs[(i+r)%len(configs)]
			l, s, err := measure(bin, *calls, c)
			if err != nil {
				fail(fmt.Errorf("%s: %w", c.name, err))
			}
			launch[c.name] = append(launch[c.name], l)
			sync[c.name] = append(sync[c.name], s)
		}
	}
	base := configs[0].name
	fmt.Printf("%d launches and %d syncs x %d rounds, medians; a launch is one probe hit (entry), a sync two (entry, return)\n\n", *calls, *calls, *rounds)
	fmt.Println("| configuration | ns/launch | probe cost per launch (ns) | ns/sync | probe cost per sync (ns) |")
	fmt.Println("|---|---|---|---|---|")
	for _, c := range configs {
		fmt.Printf("| %s | %.1f | %.1f | %.1f | %.1f |\n", c.name, median(launch[c.name]), median(launch[c.name])-median(launch[base]),
			median(sync[c.name]), median(sync[c.name])-median(sync[base]))
	}
	l := median(launch[configs[1].name]) - median(launch[base])
	fmt.Println()
	sy := median(sync[configs[1].name]) - median(sync[base])
	bl := median(launch[configs[3].name]) - median(launch[base])
	bs := median(sync[configs[3].name]) - median(sync[base])
	fmt.Printf("CUDA probe cost per launch: %.0f ns; per sync: %.0f ns\n", l, sy)
	fmt.Printf("empty programs' cost per launch (entry + return): %.0f ns, per sync: %.0f ns\n", bl, bs)
	fmt.Printf("sync probes / empty programs (entry + return): %.2fx\n", sy/bs)
	fmt.Printf("at 10k launches/s the launch probes take %.2f%% of the launching thread's time\n", l*1e4/1e9*100)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cudacost:", err)
	os.Exit(1)
}

// build compiles the stand-in driver as libcuda.so.1 and the loop linked
// against it into a temporary directory; it returns the loop.
func build() (string, error) {
	dir, err := os.MkdirTemp("", "cudacost")
	if err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libcuda.so.1")
	bin := filepath.Join(dir, "cudaloop")
	for _, c := range [][]string{
		{"gcc", "-O2", "-fno-omit-frame-pointer", "-fcf-protection=none", "-fPIC", "-shared", "-o", lib, "integration/testdata/fakecuda.c"},
		{"gcc", "-O2", "-o", bin, "bench/cudaloop.c", lib, "-Wl,-rpath,$ORIGIN"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return bin, nil
}

func measure(bin string, calls int, c config) (launch, sync float64, err error) {
	cmd := exec.Command(bin, strconv.Itoa(calls))
	cmd.Env = append(os.Environ(), "FAKECUDA_KERNEL_US=0", "FAKECUDA_GRAPH_US=0")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		return 0, 0, fmt.Errorf("target not ready: %q %v", line, err)
	}
	pid := cmd.Process.Pid
	if pinTarget >= 0 {
		var set unix.CPUSet
		set.Set(pinTarget)
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			return 0, 0, fmt.Errorf("pinning the target to CPU %d: %w", pinTarget, err)
		}
	}
	if c.bare {
		closers, err := attachBare(pid)
		if err != nil {
			return 0, 0, err
		}
		defer func() {
			for _, b := range closers {
				b.Close()
			}
		}()
	}
	var sess *loader.Session
	if c.probe {
		t, err := loader.FindCUDA(pid)
		if err != nil {
			return 0, 0, err
		}
		if sess, err = loader.Attach(pid, nil, loader.Options{CUDA: t, CUDALaunches: c.launches}); err != nil {
			return 0, 0, err
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			_, _ = sess.Run(stop, 100*time.Millisecond, func(*spanbuilder.Event) {}, func() {})
		}()
		defer func() { close(stop); <-done; sess.Close() }()
	}
	fmt.Fprintln(stdin, "go")
	line, err := out.ReadString('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("reading the result: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("result %q", line)
	}
	launch, err1 := strconv.ParseFloat(f[0], 64)
	sync, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("result %q", line)
	}
	return launch, sync, nil
}

// attachBare puts empty programs at the entry and return of the two
// functions the loop calls: the trap's own cost, the baseline of a ratio.
func attachBare(pid int) ([]io.Closer, error) {
	t, err := loader.FindCUDA(pid)
	if err != nil {
		return nil, err
	}
	var out []io.Closer
	for _, p := range t.Probes {
		if p.Names[0] != "cuLaunchKernel" && p.Names[0] != "cuStreamSynchronize" {
			continue
		}
		b, err := benchprobes.AttachBare(t.File.Open, p.Offset, pid, true)
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
	return out, nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
