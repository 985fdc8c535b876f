package pyproc

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/internal/testinterp"
)

func checkErrors(t *testing.T, p *Process) {
	_, err := p.FindCode("specfixture.wrokers", "EAGLEWorkerV2.verify")
	var mnf *ModuleNotFoundError
	if !errors.As(err, &mnf) || !slices.Contains(mnf.Near, fixtureModule) {
		t.Errorf("missing module: %v", err)
	}
	_, err = p.FindCode(fixtureModule, "EAGLEWorkerV2.verfy")
	var ae *AttributeError
	if !errors.As(err, &ae) || ae.Owner != fixtureModule+".EAGLEWorkerV2" || !slices.Contains(ae.Near, "verify") {
		t.Errorf("missing attribute: %v", err)
	}
	_, err = p.FindCode(fixtureModule, "EagleWorkerV2.verify")
	if !errors.As(err, &ae) || !slices.Contains(ae.Near, "EAGLEWorkerV2") {
		t.Errorf("missing class: %v", err)
	}
	_, err = p.FindCode(fixtureModule, "CONSTANT")
	var nf *NotFunctionError
	if !errors.As(err, &nf) || nf.Type != "int" {
		t.Errorf("not a function: %v", err)
	}
	t.Logf("errors read:\n  %v\n  %v\n  %v", mnf, ae, nf)
}

func checkThreads(t *testing.T, p *Process, tg *target) {
	threads, err := p.Threads()
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	var main *Thread
	for i, th := range threads {
		tids = append(tids, th.TID)
		if th.TID == tg.tids["main"] {
			main = &threads[i]
		}
	}
	if main == nil || tg.tids["main"] != tg.pid || !slices.Contains(tids, tg.tids["worker"]) {
		t.Fatalf("thread TIDs %v, want main %d and worker %d", tids, tg.tids["main"], tg.tids["worker"])
	}
	stack, err := p.Stack(*main)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range stack {
		names = append(names, c.Name)
	}
	// The main thread blocks in sys.stdin.read() inside main().
	if len(names) < 2 || names[0] != "main" || names[len(names)-1] != "<module>" {
		t.Errorf("main thread stack %v, want main … <module>", names)
	}
}

func TestRefusesOldPython(t *testing.T) {
	tg := startOld(t, testinterp.Py39)
	_, err := Attach(tg)
	if err == nil || !strings.Contains(err.Error(), "3.9 is not supported") || !strings.Contains(err.Error(), "3.10") {
		t.Fatalf("3.9: %v", err)
	}
	t.Log(err)
}

// startOld starts an idle interpreter (the fixture may not run on it).
func startOld(t *testing.T, python string) int {
	if _, err := os.Stat(python); err != nil {
		t.Skipf("interpreter %s not present", python)
	}
	cmd := exec.Command(python, "-c", "import sys; print('ready', flush=True); sys.stdin.read()")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	bufio.NewReader(stdout).ReadString('\n')
	return cmd.Process.Pid
}

func TestNotPython(t *testing.T) {
	_, err := Attach(os.Getpid())
	if err == nil || !strings.Contains(err.Error(), "not a CPython process") {
		t.Fatalf("attach to a Go process: %v", err)
	}
}

// checkImmortal: 3.12 deep-freezes stdlib modules such as posixpath into
// immortal objects that Py_INCREF skips (3.11 deep-freezes them with a large
// ordinary refcount; 3.13 no longer deep-freezes).
func checkImmortal(t *testing.T, p *Process) {
	c, err := p.FindCode("posixpath", "join")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("posixpath.join: refcnt %#x immortal %v", c.Refcnt, c.Immortal)
	if want := p.Version().Minor == 12; c.Immortal != want {
		t.Errorf("posixpath.join: Immortal %v, want %v (refcnt %#x)", c.Immortal, want, c.Refcnt)
	}
}

// FrameNotFoundError reaches the session summary ("last failure: ..."): it
// must read as a sentence in every case, an empty stack included.
func TestFrameNotFoundMessage(t *testing.T) {
	for _, c := range []struct {
		e    FrameNotFoundError
		want string
	}{
		{FrameNotFoundError{TID: 7, Code: 0x10, Frames: 0},
			"code object 0x10 is not on thread 7's stack: the thread runs no Python code now"},
		{FrameNotFoundError{TID: 7, Code: 0x10, Frames: 3, Stack: []string{"wait", "stage", "<module>"}},
			"code object 0x10 is not on thread 7's stack; the thread runs wait <- stage <- <module>"},
		{FrameNotFoundError{TID: 7, Code: 0x10, Frames: 2},
			"code object 0x10 is not on thread 7's stack (2 frames, their names unreadable)"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if strings.Contains(c.e.Error(), "()") || strings.Contains(c.e.Error(), ": )") {
			t.Errorf("empty parts in %q", c.e.Error())
		}
	}
}
