// Command pywatch measures what tracing a Python stage costs the traced
// interpreter (the Python rows of `make bench`, issue 3). The workload
// (workload.py, next to this file) makes millions of small calls unrelated to
// the stage and one stage() call every -every of them. Side by side, in one
// run, configurations interleaved round by round:
//
//   - untraced;
//   - specprobe: a hardware write watchpoint on stage's code object running
//     watch_hit, with the reader draining the ring buffer on another CPU;
//   - bare watchpoint: the same watchpoint running an empty program;
//   - an in-process span per stage call (what engines do today);
//   - USDT python:function__return (Debian's python3.11 has the SystemTap
//     probes) with an empty program, its semaphore raised so it fires.
//
// Needs root (or CAP_BPF and CAP_PERFMON, and ptrace access to the workload).
// Every probe is fd-based: it goes when closed, and with the process if it
// dies; pywatch checks at the end that it holds none.
package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/benchprobes"
	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/spanbuilder"
)

type config struct {
	py    string // interpreter key: "main" or "usdt"
	name  string
	mode  string // workload mode: plain or span
	probe string // "", "specprobe", "specprobe-requests", "specprobe-requests-nopush", "specprobe-nokept", "bare-watch" or "usdt"
}

// batchSizes are the batches a stage with requests is measured at: its
// requests are read at each call's return, in the watchpoint program.
var batchSizes = []int{1, 16, 64, 256}

var allConfigs = []config{
	{"main", "untraced", "plain", ""},
	{"main", "specprobe (watchpoint + watch_hit + reader)", "plain", "specprobe"},
	{"main", "specprobe, stage with requests (32 read at each return)", "plain", "specprobe-requests"},
	// What the look for temporaries at each push costs a call whose batch is
	// kept in a variable (bpf/pyread.h py_frame_push): the same without it.
	{"main", "specprobe, stage with requests, no look for temporaries at the push", "plain", "specprobe-requests-nopush"},
	{"main", "bare watchpoint (empty program)", "plain", "bare-watch"},
	{"main", "in-process span per stage call", "span", ""},
	{"usdt", "untraced", "plain", ""},
	{"usdt", "specprobe (watchpoint + watch_hit + reader)", "plain", "specprobe"},
	{"usdt", "bare watchpoint (empty program)", "plain", "bare-watch"},
	{"usdt", "USDT python:function__return (empty program)", "plain", "usdt"},
	// What kept_return costs (3.10, 3.11): it fires for every frame that
	// outlives its return, here each unrelated call's, raising.
	{"usdt", "untraced, each unrelated call raising", "raise", ""},
	{"usdt", "specprobe, each unrelated call raising", "raise", "specprobe"},
	{"usdt", "specprobe without kept_return, each unrelated call raising", "raise", "specprobe-nokept"},
}

// result is one run of the workload.
type result struct {
	rate    float64 // unrelated calls per second outside the stage calls
	stageUs float64 // µs per stage call, measured around each call
	stages  float64 // stage calls per second of wall time
	hits    float64 // watchpoint events per stage call (specprobe only)
	read    float64 // share of the calls whose requests were read at the trap (a stage with requests)
	// The same, untraced, in the same process just before and after: the
	// mean of the two.
	refRate, refStageUs float64
}

var (
	pinTarget int
	duration  time.Duration
	every     int
	script    string
	interps   = map[string]string{}
	usdtProbe *sdtProbe

	mu      sync.Mutex
	running *exec.Cmd
)

func main() {
	flag.StringVar(&script, "workload", "bench/pywatch/workload.py", "the workload script")
	mainPy := flag.String("python", testinterp.Py312, "interpreter for the main rows")
	usdtPy := flag.String("usdt-python", testinterp.Debian311, "interpreter built with SystemTap probes, for the USDT rows (empty: skip them)")
	flag.DurationVar(&duration, "duration", 300*time.Millisecond, "length of one measurement (three per run: untraced, traced, untraced)")
	flag.IntVar(&every, "every", 10000, "unrelated calls between two stage calls")
	rounds := flag.Int("rounds", 11, "runs per configuration")
	verbose := flag.Bool("v", false, "print each measurement to stderr")
	flag.IntVar(&pinTarget, "pin-target", -1, "run the workload on this CPU (run pywatch itself elsewhere, e.g. with taskset)")
	flag.Parse()
	if err := loader.CheckPrivileges(); err != nil {
		fail(err)
	}
	if _, err := os.Stat(script); err != nil {
		fail(fmt.Errorf("workload script: %w (run from the repository root or pass -workload)", err))
	}
	var configs []config
	if _, err := os.Stat(*mainPy); err != nil {
		fmt.Fprintf(os.Stderr, "pywatch: skipping the main rows: %v\n", err)
	} else {
		interps["main"] = *mainPy
	}
	if *usdtPy != "" {
		p, err := findSDT(*usdtPy, "python", "function__return")
		if err != nil {
			fmt.Fprintf(os.Stderr, "pywatch: skipping the %s rows: %v\n", *usdtPy, err)
		} else {
			interps["usdt"], usdtProbe = *usdtPy, p
		}
	}
	all := slices.Clone(allConfigs)
	for _, n := range batchSizes {
		all = append(all,
			config{"main", fmt.Sprintf("untraced, batch of %d", n), fmt.Sprintf("plain:%d", n), ""},
			config{"main", fmt.Sprintf("specprobe, stage with requests, batch of %d", n), fmt.Sprintf("plain:%d", n), "specprobe-requests"})
	}
	for _, c := range all {
		if interps[c.py] != "" {
			configs = append(configs, c)
		}
	}
	if len(configs) == 0 {
		fmt.Println("pywatch: no interpreter to measure")
		return
	}
	stopOnSignal()

	results := map[config][]result{}
	for r := 0; r < *rounds; r++ {
		for i := range configs {
			c := configs[(i+r)%len(configs)]
			res, err := measure(c)
			if err != nil {
				fail(fmt.Errorf("%s, %s: %w", interps[c.py], c.name, err))
			}
			results[c] = append(results[c], res)
			if *verbose {
				fmt.Fprintf(os.Stderr, "round %d  %-4s %-48s %6.2fM unrelated calls/s (untraced around it %6.2fM)  %6.2f µs/stage (%5.2f)\n",
					r, c.py, c.name, res.rate/1e6, res.refRate/1e6, res.stageUs, res.refStageUs)
			}
		}
	}
	if err := checkNothingLeft(); err != nil {
		fail(err)
	}
	report(configs, results, *rounds)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pywatch:", err)
	os.Exit(1)
}

// stopOnSignal kills the running workload on SIGINT/SIGTERM; the probes are
// file descriptors of this process and go with it.
func stopOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-ch
		mu.Lock()
		if running != nil {
			_ = running.Process.Kill()
		}
		mu.Unlock()
		fmt.Fprintf(os.Stderr, "pywatch: %v: workload killed, probes closed with this process\n", s)
		os.Exit(1)
	}()
}

// measure runs one workload process: an untraced measurement, one with the
// configuration's probe (or span), and another untraced one. The probed run is
// compared with the mean of the two around it, a second or so apart in the
// same process: this VM's speed drifts by tens of percent over seconds, far
// more than what is measured.
func measure(c config) (result, error) {
	py := interps[c.py]
	cmd := exec.Command(py, script, fmt.Sprint(duration.Seconds()), fmt.Sprint(every), fmt.Sprint(pinTarget))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	mu.Lock()
	err := cmd.Start()
	running = cmd
	mu.Unlock()
	if err != nil {
		return result{}, err
	}
	defer func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		mu.Lock()
		running = nil
		mu.Unlock()
	}()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		return result{}, fmt.Errorf("workload not ready: %q %v", line, err)
	}
	pid := cmd.Process.Pid
	phase := func(mode string) (p phaseResult, err error) {
		fmt.Fprintf(stdin, "go %s\n", mode)
		line, err := out.ReadString('\n')
		if err != nil {
			return p, fmt.Errorf("reading the result: %v", err)
		}
		var unrelatedNs, stageNs, wallNs float64
		if _, err := fmt.Sscanf(line, "unrelated %g unrelated_ns %g stages %g stage_ns %g wall_ns %g", &p.calls, &unrelatedNs, &p.stages, &stageNs, &wallNs); err != nil {
			return p, fmt.Errorf("workload result %q: %v", line, err)
		}
		p.rate, p.stageUs, p.stageRate = p.calls/unrelatedNs*1e9, stageNs/p.stages/1e3, p.stages/wallNs*1e9
		return p, nil
	}

	// The untraced runs around it use the same batch.
	ref := "plain"
	if strings.HasPrefix(c.mode, "plain") || c.mode == "raise" {
		ref = c.mode
	}
	before, err := phase(ref)
	if err != nil {
		return result{}, err
	}
	var closer io.Closer
	var events func() (float64, float64, string)
	switch c.probe {
	case "specprobe", "specprobe-nokept":
		closer, events, err = attachSpecprobe(pid, false, false, c.probe == "specprobe-nokept")
	case "specprobe-requests", "specprobe-requests-nopush":
		closer, events, err = attachSpecprobe(pid, true, c.probe == "specprobe-requests-nopush", false)
	case "bare-watch":
		var code *pyproc.Code
		var proc *pyproc.Process
		if code, proc, err = findStage(pid); err == nil {
			proc.Close()
			closer, err = benchprobes.ArmBareWatch(pid, code.Addr)
		}
	case "usdt":
		closer, err = attachUSDT(py, usdtProbe, pid)
	}
	if err != nil {
		return result{}, err
	}
	during, err := phase(c.mode)
	if closer != nil {
		if cerr := closer.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("detaching: %w", cerr)
		}
	}
	if err != nil {
		return result{}, err
	}
	after, err := phase(ref)
	if err != nil {
		return result{}, err
	}
	res := result{
		rate: during.rate, stageUs: during.stageUs, stages: during.stageRate,
		refRate: (before.rate + after.rate) / 2, refStageUs: (before.stageUs + after.stageUs) / 2,
	}
	if events != nil {
		n, read, problem := events()
		if problem != "" {
			return result{}, errors.New(problem)
		}
		res.hits, res.read = n/during.stages, read
	}
	return res, nil
}

type phaseResult struct {
	calls, stages, rate, stageUs, stageRate float64
}

// findStage finds stage()'s code object; the caller closes proc.
func findStage(pid int) (*pyproc.Code, *pyproc.Process, error) {
	proc, err := pyproc.Attach(pid)
	if err != nil {
		return nil, nil, err
	}
	code, err := proc.FindCode("__main__", "stage")
	if err != nil {
		proc.Close()
		return nil, nil, err
	}
	return code, proc, nil
}

// attachSpecprobe traces stage() the way `specprobe attach` traces a Python
// stage: ArmPython (watchpoint, watch_hit, the frame push/pop classifier) and
// a reader taking every event off the ring buffer as it comes. A stage with
// requests reads them at each call's return, in watch_hit
// (requests: {arg: batch, id: rid}); the share of calls whose read came
// back whole is reported.
func attachSpecprobe(pid int, requests, noPush, noKept bool) (io.Closer, func() (float64, float64, string), error) {
	_, proc, err := findStage(pid)
	if err != nil {
		return nil, nil, err
	}
	defer proc.Close()
	st := &probes.Stage{Name: probes.Verify, Scope: probes.ScopeBatch, Module: "__main__", Qualname: "stage"}
	if requests {
		st.Requests = &probes.PyRequests{Arg: "batch", ID: "rid"}
	}
	targets, err := loader.ResolvePython(proc, &probes.Spec{Engine: "pywatch", Stages: map[string]*probes.Stage{probes.Verify: st}}, time.Second)
	if err != nil {
		return nil, nil, err
	}
	if requests && targets[0].Program == nil {
		return nil, nil, fmt.Errorf("requests not compiled for the watchpoint program: %s", targets[0].NotCompiled)
	}
	if noPush {
		targets[0].Program.Prog.Push = 0
	}
	sess, err := loader.Attach(pid, nil, loader.Options{Python: true, NoKeptReturn: noKept})
	if err != nil {
		return nil, nil, err
	}
	if err := sess.ArmPython(targets, proc); err != nil {
		sess.Close()
		return nil, nil, err
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	var entries, exits, read int
	go func() {
		defer close(done)
		_, _ = sess.Run(stop, 100*time.Millisecond, func(e *spanbuilder.Event) {
			if !e.Exit {
				entries++
				return
			}
			exits++
			if r, ok := e.Read.(*loader.PyCallRead); ok && r.Err == nil && len(r.Fields) == 1 && r.Fields[0].Err == nil {
				read++
			}
		}, func() {})
	}()
	var drops uint64
	closer := closerFunc(func() error {
		close(stop)
		<-done
		drops = sess.Drops()
		return sess.Close()
	})
	events := func() (float64, float64, string) {
		if drops > 0 {
			return 0, 0, fmt.Sprintf("%d events dropped", drops)
		}
		if entries != exits {
			return 0, 0, fmt.Sprintf("%d entries but %d exits", entries, exits)
		}
		return float64(entries + exits), float64(read) / float64(max(exits, 1)), ""
	}
	return closer, events, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// sdtProbe is a SystemTap probe of an ELF file: where it is and the
// semaphore that turns it on, both as file offsets.
type sdtProbe struct {
	provider, name string
	offsets        []uint64
	semaphore      uint64
}

// findSDT reads the .note.stapsdt notes of path and returns every site of
// provider:name (a probe may be placed in several spots).
func findSDT(path, provider, name string) (*sdtProbe, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	notes := f.Section(".note.stapsdt")
	if notes == nil {
		return nil, fmt.Errorf("%s has no .note.stapsdt section: built without SystemTap probes", path)
	}
	data, err := notes.Data()
	if err != nil {
		return nil, err
	}
	var base uint64 // where .stapsdt.base is now, to undo prelinking
	if s := f.Section(".stapsdt.base"); s != nil {
		base = s.Addr
	}
	p := &sdtProbe{provider: provider, name: name}
	align4 := func(n uint32) uint32 { return (n + 3) &^ 3 }
	for len(data) >= 12 {
		namesz, descsz, typ := binary.LittleEndian.Uint32(data), binary.LittleEndian.Uint32(data[4:]), binary.LittleEndian.Uint32(data[8:])
		end := 12 + int(align4(namesz)) + int(align4(descsz))
		if end > len(data) {
			return nil, fmt.Errorf("%s: truncated .note.stapsdt", path)
		}
		owner := data[12 : 12+namesz]
		desc := data[12+align4(namesz) : 12+align4(namesz)+descsz]
		data = data[end:]
		if typ != 3 || string(bytes.TrimRight(owner, "\x00")) != "stapsdt" || len(desc) < 24 {
			continue
		}
		pc, noteBase, sem := binary.LittleEndian.Uint64(desc), binary.LittleEndian.Uint64(desc[8:]), binary.LittleEndian.Uint64(desc[16:])
		strs := bytes.Split(desc[24:], []byte{0})
		if len(strs) < 2 || string(strs[0]) != provider || string(strs[1]) != name {
			continue
		}
		if base != 0 && noteBase != 0 {
			pc += base - noteBase
		}
		off, err := fileOffset(f, pc)
		if err != nil {
			return nil, fmt.Errorf("%s: probe %s:%s at %#x: %w", path, provider, name, pc, err)
		}
		p.offsets = append(p.offsets, off)
		if sem != 0 {
			if p.semaphore, err = fileOffset(f, sem); err != nil {
				return nil, fmt.Errorf("%s: semaphore of %s:%s at %#x: %w", path, provider, name, sem, err)
			}
		}
	}
	if len(p.offsets) == 0 {
		return nil, fmt.Errorf("%s has no SystemTap probe %s:%s", path, provider, name)
	}
	return p, nil
}

func fileOffset(f *elf.File, vaddr uint64) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, nil
		}
	}
	return 0, errors.New("not in any loaded segment")
}

// attachUSDT puts a uprobe running the empty `bare` program on every site of
// the probe, restricted to pid; the kernel raises the probe's semaphore in
// pid while attached, which is what makes the interpreter fire it.
func attachUSDT(path string, p *sdtProbe, pid int) (io.Closer, error) {
	objs, ex, err := benchprobes.LoadFor(path)
	if err != nil {
		return nil, err
	}
	u := &usdt{objs: objs}
	for _, off := range p.offsets {
		l, err := ex.Uprobe(p.name, objs.Bare, &link.UprobeOptions{Address: off, PID: pid, RefCtrOffset: p.semaphore})
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("USDT %s:%s at %#x: %w", p.provider, p.name, off, err)
		}
		u.links = append(u.links, l)
	}
	return u, nil
}

type usdt struct {
	objs  bpf.StageObjects
	links []link.Link
}

func (u *usdt) Close() error {
	var errs []error
	for _, l := range u.links {
		errs = append(errs, l.Close())
	}
	return errors.Join(append(errs, u.objs.Close())...)
}

// checkNothingLeft makes sure every program, map, link and perf event
// (watchpoints, uprobes) this process opened is closed again.
func checkNothingLeft() error {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	var left []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil {
			continue
		}
		for _, kind := range []string{"bpf-prog", "bpf-link", "bpf-map", "[perf_event]"} {
			if strings.Contains(target, kind) {
				left = append(left, fd.Name()+" "+target)
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("probes left open after the runs: %s", strings.Join(left, ", "))
	}
	return nil
}

// report prints medians over the rounds. Ratios and added costs are paired:
// each run against the untraced runs just before and after it in the same
// process; the untraced configuration's own ratio shows what noise is left.
func report(configs []config, results map[config][]result, rounds int) {
	each := func(c config, f func(r result) float64) []float64 {
		var xs []float64
		for _, r := range results[c] {
			xs = append(xs, f(r))
		}
		sort.Float64s(xs)
		return xs
	}
	med := func(xs []float64) float64 { return xs[len(xs)/2] }
	ratios := func(c config) []float64 { return each(c, func(r result) float64 { return r.rate / r.refRate }) }
	ratio := func(c config) float64 { return med(ratios(c)) }
	added := func(c config) float64 {
		return med(each(c, func(r result) float64 { return r.stageUs - r.refStageUs }))
	}
	fmt.Printf("workload: %d unrelated calls per stage call, %v per measurement, %d rounds, configurations interleaved; medians;\n", every, duration, rounds)
	fmt.Printf("each run compared with untraced runs just before and after it in the same process; workload pinned to CPU %d\n\n", pinTarget)
	fmt.Println("| interpreter | configuration | unrelated calls/s | vs untraced (min–max) | stage calls/s | µs per stage call | added µs per stage call | watch events per stage call |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, c := range configs {
		hits := "–"
		if strings.HasPrefix(c.probe, "specprobe") {
			hits = fmt.Sprintf("%.2f", med(each(c, func(r result) float64 { return r.hits })))
		}
		rs := ratios(c)
		fmt.Printf("| %s | %s | %.2fM | %.3fx (%.2f–%.2f) | %.0f | %.2f | %.2f | %s |\n", interps[c.py], c.name,
			med(each(c, func(r result) float64 { return r.rate }))/1e6, med(rs), rs[0], rs[len(rs)-1],
			med(each(c, func(r result) float64 { return r.stages })),
			med(each(c, func(r result) float64 { return r.stageUs })), added(c), hits)
	}
	find := func(py, probe, mode string) (config, bool) {
		for _, c := range configs {
			if c.py == py && c.probe == probe && c.mode == mode {
				return c, true
			}
		}
		return config{}, false
	}
	fmt.Println()
	for _, py := range []string{"main", "usdt"} {
		sp, ok := find(py, "specprobe", "plain")
		if !ok {
			continue
		}
		fmt.Printf("%s:\n", interps[py])
		if b, ok := find(py, "", "plain"); ok {
			fmt.Printf("  unrelated calls/s, specprobe / untraced:              %.3fx  (goal >= 0.98; %.3fx against the untraced row's own %.3fx)\n", ratio(sp), ratio(sp)/ratio(b), ratio(b))
		}
		fmt.Printf("  added cost per stage call, specprobe:                 %.2f µs  (two watchpoint hits: frame push, frame pop)\n", added(sp))
		if bw, ok := find(py, "bare-watch", "plain"); ok {
			fmt.Printf("  added cost per stage call, bare watchpoint:           %.2f µs\n", added(bw))
			fmt.Printf("  specprobe / bare watchpoint, per watched call:        %.2fx\n", added(sp)/added(bw))
			if sr, ok := find(py, "specprobe-requests", "plain"); ok {
				fmt.Printf("  added cost per stage call, stage with 32 requests:    %.2f µs  (%.2fx the bare watchpoint; goal <= 1.3x)\n", added(sr), added(sr)/added(bw))
				if np, ok := find(py, "specprobe-requests-nopush", "plain"); ok {
					fmt.Printf("  of which the look for temporaries at the push:        %.2f µs  (%.2fx the same without it)\n", added(sr)-added(np), added(sr)/added(np))
				}
			}
			for _, n := range batchSizes {
				if sr, ok := find(py, "specprobe-requests", fmt.Sprintf("plain:%d", n)); ok {
					fmt.Printf("  batch of %3d: added %.2f µs per call (%.2fx the bare watchpoint), requests read at the trap for %.1f%% of the calls\n",
						n, added(sr), added(sr)/added(bw), 100*med(each(sr, func(r result) float64 { return r.read })))
				}
			}
		}
		if sc, ok := find(py, "", "span"); ok {
			fmt.Printf("  added cost per stage call, in-process span:           %.2f µs\n", added(sc))
			fmt.Printf("  specprobe / in-process span, per stage call:          %.2fx\n", added(sp)/added(sc))
		}
		if r, ok := find(py, "specprobe", "raise"); ok {
			if nk, ok := find(py, "specprobe-nokept", "raise"); ok {
				fmt.Printf("  unrelated calls/s, each raising, specprobe / untraced: %.3fx; without kept_return: %.3fx\n", ratio(r), ratio(nk))
				perCall := func(c config) float64 {
					return med(each(c, func(r result) float64 { return 1e6/r.rate - 1e6/r.refRate }))
				}
				fmt.Printf("  kept_return per frame that outlives its return:       %.2f µs  (calls/s %.3fx those without it)\n", perCall(r)-perCall(nk), ratio(r)/ratio(nk))
			}
		}
		if u, ok := find(py, "usdt", "plain"); ok {
			perCall := med(each(u, func(r result) float64 { return 1e6/r.rate - 1e6/r.refRate }))
			fmt.Printf("  unrelated calls/s, untraced / USDT function__return:  %.1fx  (%.2f µs added per unrelated call)\n", 1/ratio(u), perCall)
			fmt.Printf("  unrelated calls/s, specprobe / USDT function__return: %.1fx\n", ratio(sp)/ratio(u))
		}
	}
}
