// Command pyread measures what reading a batch of requests from a running
// CPython costs specprobe's user-space reader (the pyread rows of `make
// bench`): reqs[*].rid of a batch of N SGLang-shaped requests (workload.py,
// next to this file), read from outside with pyproc's Eval — level by level,
// one vectored read per step for the whole batch, type caches kept — and
// with EvalItemByItem, one object at a time as Eval read before, side by
// side in one run: rounds interleave the sizes and the two readings.
//
// For each N it prints the time per read (median and 90th percentile of the
// reads, and the reader thread's CPU time per read) and the system calls
// per read. Reading another process's memory needs root or ptrace access
// (the workload is this program's child).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/pyproc"
)

// goalUs is issue 10's bound on reading a batch of 256 requests.
const goalUs = 500

type mode struct {
	name string
	eval func(p *pyproc.Process, obj uint64, path string) (pyproc.Value, error)
}

var modes = []mode{
	{"batched (Eval)", (*pyproc.Process).Eval},
	{"item by item (EvalItemByItem)", (*pyproc.Process).EvalItemByItem},
}

// sample is what one round measured for a size and a mode.
type sample struct {
	wall     []time.Duration // each read
	cpu      time.Duration   // the thread's CPU time over the round
	syscalls int
	reads    int
}

func main() {
	script := flag.String("workload", "bench/pyread/workload.py", "the workload script")
	python := flag.String("python", testinterp.Py312, "the interpreter")
	sizeList := flag.String("sizes", "1,16,64,256", "batch sizes")
	rounds := flag.Int("rounds", 7, "rounds; each reads every size both ways")
	reads := flag.Int("reads", 200, "reads per size, mode and round")
	path := flag.String("path", "reqs[*].rid", "the object path read from each batch")
	pinTarget := flag.Int("pin-target", -1, "run the workload on this CPU (run pyread itself elsewhere, e.g. with taskset)")
	flag.Parse()
	sizes := parseSizes(*sizeList)
	for _, f := range []string{*script, *python} {
		if _, err := os.Stat(f); err != nil {
			fail(fmt.Errorf("%w (run from the repository root, or pass -workload and -python)", err))
		}
	}
	cmd, hello, stop := startWorkload(*python, *script, sizes, *pinTarget)
	defer stop()
	p, err := pyproc.Attach(cmd.Process.Pid)
	if err != nil {
		fail(err)
	}
	defer p.Close()

	// Both readings must read what the workload holds.
	for _, n := range sizes {
		want := make([]pyproc.Value, n)
		for i, r := range hello.Rids[strconv.Itoa(n)] {
			want[i] = r
		}
		for _, m := range modes {
			v, err := m.eval(p, hello.Batches[strconv.Itoa(n)], *path)
			if err != nil || !reflect.DeepEqual(v, pyproc.Value(want)) {
				fail(fmt.Errorf("N=%d, %s: read %.100v, %v; the workload holds %.100v", n, m.name, v, err, want))
			}
		}
	}

	results := measure(p, hello.Batches, sizes, *path, *rounds, *reads)
	report(os.Stdout, *path, *python, sizes, results, *rounds, *reads)
}

func parseSizes(list string) []int {
	var sizes []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fail(fmt.Errorf("-sizes: bad size %q", s))
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// hello is the workload's first line: each batch's address and the
// request ids it holds, by size.
type hello struct {
	Batches map[string]uint64   `json:"batches"`
	Rids    map[string][]string `json:"rids"`
}

// startWorkload runs the workload (on CPU pin, where pin >= 0) and reads
// its hello; stop ends it.
func startWorkload(python, script string, sizes []int, pin int) (*exec.Cmd, hello, func()) {
	args := []string{script}
	for _, n := range sizes {
		args = append(args, strconv.Itoa(n))
	}
	cmd := exec.Command(python, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	stop := func() { stdin.Close(); cmd.Wait() }
	if pin >= 0 {
		var set unix.CPUSet
		set.Set(pin)
		if err := unix.SchedSetaffinity(cmd.Process.Pid, &set); err != nil {
			stop()
			fail(fmt.Errorf("pinning the workload to CPU %d: %w", pin, err))
		}
	}
	var h hello
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err != nil {
		stop()
		fail(fmt.Errorf("workload: %q: %v", line, err))
	}
	return cmd, h, stop
}

// measure reads every batch both ways, rounds interleaving the sizes and
// the readings, on one OS thread, whose CPU time getrusage reports.
func measure(p *pyproc.Process, batches map[string]uint64, sizes []int, path string, rounds, reads int) map[[2]int]*sample {
	runtime.LockOSThread()
	results := map[[2]int]*sample{}
	for r := 0; r < rounds; r++ {
		for i := range sizes {
			n := sizes[(i+r)%len(sizes)]
			for j := range modes {
				mi := (j + r) % len(modes)
				s := results[[2]int{n, mi}]
				if s == nil {
					s = &sample{}
					results[[2]int{n, mi}] = s
				}
				batch := batches[strconv.Itoa(n)]
				calls, cpu := p.Stats.Reads, threadCPU()
				for k := 0; k < reads; k++ {
					t := time.Now()
					if _, err := modes[mi].eval(p, batch, path); err != nil {
						fail(fmt.Errorf("N=%d, %s: %w", n, modes[mi].name, err))
					}
					s.wall = append(s.wall, time.Since(t))
				}
				s.cpu += threadCPU() - cpu
				s.syscalls += p.Stats.Reads - calls
				s.reads += reads
			}
		}
	}
	return results
}

// threadCPU is the calling thread's user and system time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		fail(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func report(out *os.File, path, python string, sizes []int, results map[[2]int]*sample, rounds, reads int) {
	fmt.Fprintf(out, "%s of a batch of N requests (bench/pyread/workload.py, %s), %d rounds x %d reads per size and reading\n\n",
		path, python, rounds, reads)
	fmt.Fprintln(out, "| N | reading | µs per read (median) | p90 | CPU µs per read | system calls per read |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	med := map[[2]int]float64{}
	for _, n := range sizes {
		for mi, m := range modes {
			s := results[[2]int{n, mi}]
			w := slices.Clone(s.wall)
			sort.Slice(w, func(a, b int) bool { return w[a] < w[b] })
			med[[2]int{n, mi}] = us(w[len(w)/2])
			fmt.Fprintf(out, "| %d | %s | %.1f | %.1f | %.1f | %.1f |\n", n, m.name, us(w[len(w)/2]), us(w[len(w)*9/10]),
				us(s.cpu)/float64(s.reads), float64(s.syscalls)/float64(s.reads))
		}
	}
	fmt.Fprintln(out)
	for _, n := range sizes {
		fmt.Fprintf(out, "N=%-4d item by item / batched: %.1fx the time\n", n, med[[2]int{n, 1}]/med[[2]int{n, 0}])
	}
	if b, ok := med[[2]int{256, 0}]; ok {
		verdict := "met"
		if b >= goalUs {
			verdict = "NOT met"
		}
		fmt.Fprintf(out, "goal (issue 10): a batch of 256 read in under %d µs: %s (median %.0f µs)\n", goalUs, verdict, b)
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pyread:", err)
	os.Exit(1)
}
