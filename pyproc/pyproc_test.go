package pyproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specprobe/specprobe/internal/testinterp"
)

// interpreters are the CPythons the image ships (docs/design.md, "Tests and
// the machines they run on"); CI runs on the same kind of machine.
var interpreters = func() (out []struct{ name, path string }) {
	for _, in := range testinterp.All {
		out = append(out, struct{ name, path string }{in.Name, in.Path})
	}
	return out
}()

const fixtureModule = "specfixture.workers"

type shape struct {
	Qualname     string `json:"qualname"`
	ID           uint64 `json:"id"`
	CodeQualname string `json:"code_qualname"`
	Flags        uint32 `json:"flags"`
	FirstLine    int    `json:"firstline"`
}

type target struct {
	pid     int
	shapes  []shape
	tids    map[string]int
	version []int
}

// fixture is a Python test program started with pipes to its stdin and stdout.
type fixture struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
}

// startFixture runs a testdata script under python (skipping where the
// interpreter or the privileges are missing) and kills it when t ends.
func startFixture(t testing.TB, python string, env []string, args ...string) *fixture {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("interpreter %s not present", python)
	}
	if os.Geteuid() != 0 {
		t.Skip("reading another process's memory needs root (or CAP_SYS_PTRACE)")
	}
	cmd := exec.Command(python, args...)
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &fixture{cmd: cmd, stdin: stdin, stdout: stdout}
}

// startTarget runs testdata/target.py under python and waits for "ready".
func startTarget(t testing.TB, python string, args ...string) *target {
	t.Helper()
	out := filepath.Join(t.TempDir(), "shapes.jsonl")
	fx := startFixture(t, python, []string{"PYTHONPATH=testdata"}, append([]string{"testdata/target.py", out}, args...)...)
	cmd, stdout := fx.cmd, fx.stdout
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("%s: target said %q", python, line)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: target not ready after 30s", python)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{pid: cmd.Process.Pid, tids: map[string]int{}}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rec struct {
			shape
			Thread  string `json:"thread"`
			TID     int    `json:"tid"`
			Version []int  `json:"version"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		switch {
		case rec.Thread != "":
			tg.tids[rec.Thread] = rec.TID
		case rec.Version != nil:
			tg.version = rec.Version
		default:
			tg.shapes = append(tg.shapes, rec.shape)
		}
	}
	return tg
}

func TestInterpreters(t *testing.T) {
	for _, in := range interpreters {
		t.Run(in.name, func(t *testing.T) {
			tg := startTarget(t, in.path)
			p, err := Attach(tg.pid)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			checkVersion(t, p, tg)
			checkShapes(t, p, tg)
			checkErrors(t, p)
			checkThreads(t, p, tg)
			checkImmortal(t, p)
			checkEarlyHashKey(t, tg.pid)
		})
	}
}

func checkVersion(t *testing.T, p *Process, tg *target) {
	v := p.Version()
	want := Version{tg.version[0], tg.version[1], tg.version[2]}
	if v.Minor == 10 {
		want.Micro = -1 // 3.10 exports no Py_Version: the file name gives major.minor only
	}
	if v != want {
		t.Errorf("version %s, want %s", v, want)
	}
	t.Logf("CPython %s in %s", v, p.Path)
}

func checkShapes(t *testing.T, p *Process, tg *target) {
	if len(tg.shapes) < 12 {
		t.Fatalf("target reported %d shapes", len(tg.shapes))
	}
	for _, s := range tg.shapes {
		c, err := p.FindCode(fixtureModule, s.Qualname)
		if err != nil {
			t.Errorf("%s: %v", s.Qualname, err)
			continue
		}
		if c.Addr != s.ID {
			t.Errorf("%s: code at %#x, target says %#x", s.Qualname, c.Addr, s.ID)
		}
		if c.Qualname != s.CodeQualname || c.FirstLine != s.FirstLine || c.Flags != s.Flags {
			t.Errorf("%s: got %q line %d flags %#x, want %q line %d flags %#x",
				s.Qualname, c.Qualname, c.FirstLine, c.Flags, s.CodeQualname, s.FirstLine, s.Flags)
		}
		if !strings.HasSuffix(c.Filename, "workers.py") || c.Refcnt == 0 || c.Immortal {
			t.Errorf("%s: filename %q refcnt %d", s.Qualname, c.Filename, c.Refcnt)
		}
		suspends := strings.HasSuffix(s.Qualname, "iter_tokens") || strings.HasSuffix(s.Qualname, "run_async")
		if c.Suspends() != suspends {
			t.Errorf("%s: Suspends() = %v", s.Qualname, c.Suspends())
		}
	}
	if p.hashOK != 1 || p.Stats.Fallbacks != 0 {
		t.Errorf("hashed lookups not used: hashOK %d, fallbacks %d", p.hashOK, p.Stats.Fallbacks)
	}
}

// BenchmarkFindCode times one module → code walk (an inherited, decorated
// method: MRO search and two unwraps), with sys.modules as the fixture
// leaves it and with 5,000 more modules.
func BenchmarkFindCode(b *testing.B) {
	for _, in := range interpreters {
		for _, extra := range []string{"0", "5000"} {
			b.Run(in.name+"/modules+"+extra, func(b *testing.B) {
				benchFindCode(b, in.path, extra)
			})
		}
	}
}

func benchFindCode(b *testing.B, python, extra string) {
	tg := startTarget(b, python, extra)
	p, err := Attach(tg.pid)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for b.Loop() {
		if _, err := p.FindCode(fixtureModule, "FrozenKVMTPWorkerV2.verify"); err != nil {
			b.Fatal(err)
		}
	}
	if p.Stats.Fallbacks != 0 {
		b.Errorf("%d lookups fell back to a scan", p.Stats.Fallbacks)
	}
}

func ExampleProcess_FindCode() {
	p, err := Attach(4242)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	c, err := p.FindCode("sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2.verify")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("watch %#x (%s at %s:%d)\n", c.Addr, c.Qualname, c.Filename, c.FirstLine)
}

// checkEarlyHashKey: attached while the interpreter starts, pyproc reads
// _Py_HashSecret before it is set (zero). Lookups must still find names:
// the secret is read again, and a scan never trusts a hash made with it.
func checkEarlyHashKey(t *testing.T, pid int) {
	for _, hashOK := range []int8{0, -1} {
		p, err := Attach(pid)
		if err != nil {
			t.Fatal(err)
		}
		p.hashKey, p.hashOK = [2]uint64{}, hashOK
		ok, err := p.HasModule(fixtureModule)
		if !ok || err != nil {
			t.Errorf("hashOK %d, zero hash secret: HasModule(%s) = %v, %v", hashOK, fixtureModule, ok, err)
		}
		if hashOK == 0 && p.Stats.HashRereads != 1 {
			t.Errorf("hash secret read again %d times, want 1", p.Stats.HashRereads)
		}
		p.Close()
	}
}
