// Command daemonload measures what `specprobe daemon` itself costs while it
// traces several targets at once: its CPU time (per second and per event)
// and its memory, read from /proc for the daemon process. Needs root.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/specprobe/specprobe/internal/testinterp"
)

func main() {
	bin := flag.String("specprobe", "bin/specprobe", "specprobe binary")
	demo := flag.String("demo", "demo/specdemo-cet", "native demo target")
	python := flag.String("python", testinterp.Py312, "interpreter for the SGLang-shaped targets (skipped if missing)")
	natives := flag.Int("native", 3, "native targets")
	pythons := flag.Int("py", 2, "Python targets")
	limit := flag.String("memory-limit", "200MiB", "the daemon's memory_limit (the DaemonSet's)")
	flag.Parse()
	collector, err := startCollector()
	if err != nil {
		fmt.Fprintln(os.Stderr, "daemonload:", err)
		os.Exit(1)
	}
	for _, exp := range []string{"otlp-grpc", "otlp-file=/dev/null"} {
		fmt.Printf("-- spans to %s, memory_limit %s\n", exp, *limit)
		env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + collector, "OTEL_EXPORTER_OTLP_INSECURE=true"}
		if err := run(*bin, *demo, *python, *natives, *pythons, exp, *limit, env); err != nil {
			fmt.Fprintln(os.Stderr, "daemonload:", err)
			os.Exit(1)
		}
	}
}

// sink is an OTLP/gRPC collector that drops what it gets: the daemon pays
// for encoding and sending, as with a real collector.
type sink struct {
	collectortrace.UnimplementedTraceServiceServer
}

func (sink) Export(context.Context, *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func startCollector() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, sink{})
	go srv.Serve(l)
	return l.Addr().String(), nil
}

func run(bin, demo, python string, natives, pythons int, exporter, limit string, env []string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	d := exec.Command(bin, "daemon", "--listen", addr, "--exporter", exporter, "--metrics-exporter", "none", "--engine", "demo", "--engine", "sglang", "--memory-limit", limit)
	d.Env = append(os.Environ(), env...)
	d.Stderr = io.Discard
	if err := d.Start(); err != nil {
		return err
	}
	defer func() { _ = d.Process.Signal(syscall.SIGTERM); _ = d.Wait() }()
	if err := waitReady("http://" + addr + "/readyz"); err != nil {
		return err
	}

	targets, pythons, err := startTargets(demo, python, natives, pythons)
	defer func() {
		for _, t := range targets {
			_ = t.Process.Kill()
		}
	}()
	if err != nil {
		return err
	}
	if err := waitAttached("http://"+addr+"/targets", len(targets)); err != nil {
		return err
	}
	cpu0, _ := cpuTime(d.Process.Pid)
	ev0, _ := metric("http://"+addr+"/metrics", "specprobe_events_total")
	start := time.Now()
	for _, t := range targets {
		_ = t.Process.Signal(syscall.SIGUSR1)
	}
	var peakRSS int64
	done := make(chan struct{})
	go func() {
		for _, t := range targets {
			_ = t.Wait()
		}
		close(done)
	}()
	cpu1, ev1, peakAnon, peakOther := sampleDaemon(d.Process.Pid, addr, done, cpu0, ev0)
	elapsed := time.Since(start)
	peakRSS = statusKB(d.Process.Pid, "VmHWM:")
	rss := statusKB(d.Process.Pid, "VmRSS:")
	cpu := cpu1 - cpu0
	evs := ev1 - ev0
	fmt.Printf("targets: %d native (specdemo, 2 threads) + %d Python (SGLang-shaped), traced at once for %.1fs\n", natives, pythons, elapsed.Seconds())
	fmt.Printf("events read: %.0f (%.0f/s)\n", evs, evs/elapsed.Seconds())
	fmt.Printf("daemon CPU: %.3fs = %.1f%% of one core; %.2f us per event\n", cpu.Seconds(), 100*cpu.Seconds()/elapsed.Seconds(), cpu.Seconds()*1e6/max(evs, 1))
	fmt.Printf("daemon memory: peak RSS %.1f MiB (%.1f MiB per target), RSS after %.1f MiB; at the largest sample %.1f MiB anonymous (Go heap and stacks), %.1f MiB other (binary, ring buffers mapped)\n",
		float64(peakRSS)/1024, float64(peakRSS)/1024/float64(len(targets)), float64(rss)/1024, float64(peakAnon)/1024, float64(peakOther)/1024)
	// Once every session has flushed: what the queues' bound cost.
	m := "http://" + addr + "/metrics"
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n, _ := metric(m, "specprobe_daemon_detaches_total"); n == float64(len(targets)) {
			break
		}
	}
	exported, _ := metric(m, "specprobe_spans_exported_total")
	dropped, _ := metric(m, "specprobe_spans_dropped_total")
	fmt.Printf("spans: %.0f exported, %.0f dropped at a full queue\n", exported, dropped)
	return nil
}

// startTargets starts the native demo targets and, where the interpreter
// exists, the Python ones, each waiting for SIGUSR1; pythons is how many
// Python ones it started. The caller kills the targets it gets.
func startTargets(demo, python string, natives, pythons int) ([]*exec.Cmd, int, error) {
	var targets, started []*exec.Cmd
	for range natives {
		targets = append(targets, exec.Command(demo, "--threads", "2", "--batch", "4", "--requests", "400", "--wait-signal"))
	}
	if _, err := os.Stat(python); err == nil {
		for range pythons {
			targets = append(targets, exec.Command(python, "pytargets/run_sglang.py", "--requests", "60", "--wait-signal"))
		}
	} else {
		pythons = 0
	}
	for _, t := range targets {
		out, err := t.StdoutPipe()
		if err != nil {
			return started, pythons, err
		}
		if err := t.Start(); err != nil {
			return started, pythons, err
		}
		started = append(started, t)
		if line, _ := bufio.NewReader(out).ReadString('\n'); !strings.HasPrefix(line, "ready") {
			return started, pythons, fmt.Errorf("%s not ready: %q", t.Path, line)
		}
		go io.Copy(io.Discard, out)
	}
	return started, pythons, nil
}

// sampleDaemon samples the daemon's CPU time, events and memory until done;
// VmHWM gives the peak, the samples what it is made of (the Go heap is
// anonymous memory; the ring buffers mapped from the kernel and the binary
// are not).
func sampleDaemon(pid int, addr string, done <-chan struct{}, cpu0 time.Duration, ev0 float64) (cpu1 time.Duration, ev1 float64, peakAnon, peakOther int64) {
	cpu1, ev1 = cpu0, ev0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			// The last sample before the exits: detach work is not tracing.
			cpu1, _ = cpuTime(pid)
			ev1, _ = metric("http://"+addr+"/metrics", "specprobe_events_total")
			anon := statusKB(pid, "RssAnon:")
			if rss := statusKB(pid, "VmRSS:"); anon > peakAnon {
				peakAnon, peakOther = anon, rss-anon
			}
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(url string) error {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
	}
	return fmt.Errorf("daemon not ready at %s", url)
}

func waitAttached(url string, n int) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r, err := http.Get(url)
		if err != nil {
			continue
		}
		var ts []struct{ Attached bool }
		err = json.NewDecoder(r.Body).Decode(&ts)
		r.Body.Close()
		attached := 0
		for _, t := range ts {
			if t.Attached {
				attached++
			}
		}
		if err == nil && attached == n {
			return nil
		}
	}
	return fmt.Errorf("the daemon did not attach to all %d targets", n)
}

// cpuTime is the process's user+system time (/proc/PID/stat fields 14, 15).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / 100, nil // USER_HZ
}

func statusKB(pid int, field string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return 0
}

func metric(url, name string) (float64, error) {
	r, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", name, url)
}
