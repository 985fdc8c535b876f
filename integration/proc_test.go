package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is a process a test started and watches: its output is kept, and every
// wait on it has a deadline, so a hang fails that test at once, with what the
// process printed, instead of stalling the suite until go test's own timeout
// (in a guest of the kernel matrix that was 45 minutes of CI's 90).
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed once the process has ended and its output is read; err is set then
	err  error
}

// startProc runs argv with env added to this process's environment.
func startProc(t testing.TB, env []string, argv ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

func (p *proc) name() string { return filepath.Base(p.cmd.Path) }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitOutput waits until the output holds s. The process ending first, or
// within passing, fails the test.
func (p *proc) waitOutput(t testing.TB, s string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(p.out.String(), s); time.Sleep(10 * time.Millisecond) { // polling the output, not standing in for a sync
		if p.exited() {
			t.Fatalf("%s ended (%v) before printing %q:\n%s", p.name(), p.err, s, p.out.String())
		}
		if time.Now().After(deadline) {
			p.abort()
			t.Fatalf("%s did not print %q within %s; its output, with its goroutines:\n%s", p.name(), s, within, p.out.String())
		}
	}
}

// wait returns the exit code once the process ends; within passing fails the
// test. An error other than a non-zero exit (killed by a signal) fails it too.
func (p *proc) wait(t testing.TB, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.abort()
		t.Fatalf("%s still running after %s; its output, with its goroutines:\n%s", p.name(), within, p.out.String())
	}
	if ee, ok := p.err.(*exec.ExitError); ok && ee.Exited() {
		return ee.ExitCode()
	} else if p.err != nil {
		t.Fatalf("%s: %v\n%s", p.name(), p.err, p.out.String())
	}
	return 0
}

// abort ends a process that hangs. SIGQUIT first: a Go program prints every
// goroutine's stack as it ends, which says where it hung.
func (p *proc) abort() {
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
