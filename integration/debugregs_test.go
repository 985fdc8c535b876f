package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/loader"
)

// TestDebugRegisters checks that a watch that cannot get a debug register
// fails with an error that says so, never a silent gap, and that the target
// runs on unharmed: x86 has four per thread, so a fifth watched stage fails,
// and so does the first while a debugger (gdb) holds all four.
func TestDebugRegisters(t *testing.T) {
	needWatchpoints(t)
	py := testinterp.Py312
	if _, err := os.Stat(py); err != nil {
		t.Skipf("interpreter %s not installed", py)
	}
	cmd := exec.Command(py, filepath.Join(repoRoot(t), "integration", "testdata", "debugregs.py"))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewReader(stdout)
	line, _ := out.ReadString('\n')
	fields := strings.Fields(line)
	if len(fields) != 5 || fields[0] != "ready" {
		t.Fatalf("target not ready: %q", line)
	}
	spare := make([]uint64, 4)
	for i, f := range fields[1:] {
		spare[i], _ = strconv.ParseUint(strings.TrimPrefix(f, "0x"), 16, 64)
	}
	pid := cmd.Process.Pid
	code, sess := stageSession(t, pid)
	defer sess.Close() // also closed below, before checking nothing is left
	const noFree = "no free debug register"

	t.Run("fifth watch", func(t *testing.T) {
		var held []*loader.Watch
		for i, addr := range []uint64{code.Addr, spare[0], spare[1], spare[2]} {
			w, err := sess.ArmWatch(addr, uint32(i), 1, 0)
			if err != nil {
				t.Fatalf("watch %d of 4: %v", i+1, err)
			}
			held = append(held, w)
		}
		_, err := sess.ArmWatch(spare[3], 4, 1, 0)
		if err == nil || !strings.Contains(err.Error(), noFree) {
			t.Errorf("fifth watch: %v, want %q", err, noFree)
		} else {
			t.Logf("fifth watch: %v", err)
		}
		for _, w := range held {
			sess.DisarmWatch(w)
		}
	})

	t.Run("debugger", func(t *testing.T) {
		gdb, err := exec.LookPath("gdb")
		if err != nil {
			t.Skip("gdb not installed: cannot hold the debug registers with a debugger")
		}
		args := []string{"-nx", "-q", "-batch", "-ex", "set pagination off", "-p", strconv.Itoa(pid)}
		for _, a := range spare {
			args = append(args, "-ex", "watch -l *(long *)"+strconv.FormatUint(a, 10))
		}
		// SIGINT stops the continue; detach then removes the watchpoints.
		args = append(args, "-ex", "continue", "-ex", "detach")
		g := exec.Command(gdb, args...)
		gout, _ := g.StdoutPipe()
		g.Stderr = g.Stdout
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = g.Process.Kill(); _ = g.Wait() }()
		r := bufio.NewReader(gout)
		var said []string
		for hw := 0; hw < len(spare); {
			l, err := r.ReadString('\n')
			said = append(said, strings.TrimSpace(l))
			if strings.HasPrefix(l, "Hardware watchpoint") {
				hw++
			}
			if err != nil {
				t.Fatalf("gdb did not set 4 hardware watchpoints: %q", said)
			}
		}
		// gdb writes the debug registers of each thread as it resumes it.
		waitRunning(t, pid)
		w, err := sess.ArmWatch(code.Addr, 0, code.Refcnt, 0)
		if err == nil {
			sess.DisarmWatch(w)
			t.Fatalf("watch armed while gdb holds every debug register")
		}
		if !strings.Contains(err.Error(), noFree) || !strings.Contains(err.Error(), fmt.Sprintf("the debugger tracing it (PID %d, gdb)", g.Process.Pid)) {
			t.Errorf("watch while gdb holds the registers: %v, want %q naming gdb", err, noFree)
		} else {
			t.Logf("with gdb attached: %v", err)
		}
		_ = g.Process.Signal(syscall.SIGINT)
		rest, _ := io.ReadAll(r)
		if err := g.Wait(); err != nil || !strings.Contains(string(rest), "detached") {
			t.Fatalf("gdb: %v\n%s", err, rest)
		}
		// The kernel keeps ptrace's breakpoints (disabled) until the thread
		// exits: after the debugger has gone, the registers stay taken, and
		// the error still says so.
		w, err = sess.ArmWatch(code.Addr, 0, code.Refcnt, 0)
		if err == nil {
			sess.DisarmWatch(w)
			t.Logf("after gdb detached, the registers were free again")
		} else if !strings.Contains(err.Error(), noFree) || !strings.Contains(err.Error(), "a debugger that has detached") {
			t.Errorf("watch after gdb detached: %v, want %q and a word on detached debuggers", err, noFree)
		} else {
			t.Logf("after gdb detached: %v", err)
		}
	})

	sess.Close()
	stdin.Close()
	line, _ = out.ReadString('\n')
	if err := cmd.Wait(); err != nil || !strings.HasPrefix(line, "calls ") {
		t.Fatalf("target after the tests: %v, said %q", err, line)
	}
	assertNoProbesLeft(t)
}

// waitRunning waits until no thread of pid is stopped by its tracer.
func waitRunning(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stopped := 0
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			// The state follows the command name's closing parenthesis.
			if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] == 't' {
				stopped++
			}
		}
		if len(tasks) > 0 && stopped == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d threads of PID %d still stopped by the debugger", stopped, len(tasks), pid)
		}
		time.Sleep(time.Millisecond)
	}
}
