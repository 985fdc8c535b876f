package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/specprobe/specprobe/internal/testinterp"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

// TestStdlibHTTPServer traces a Python program nobody here wrote, with a spec
// written from its documentation alone (docs/examples/http-server.yaml): the
// standard library's http.server, whose do_GET serves one request named by
// the handler's path. The server takes each connection on a new thread,
// created after the watchpoints were armed. The ground truth is the
// client's: every path it asked for, when, and that the whole file came
// back. Run both imported (module http.server) and as `python3 -m
// http.server` (module __main__).
func TestStdlibHTTPServer(t *testing.T) {
	needWatchpoints(t)
	spec, err := probes.Load(filepath.Join(repoRoot(t), "docs", "examples", "http-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	asMain := *spec
	asMain.Stages = map[string]*probes.Stage{}
	for name, st := range spec.Stages {
		c := *st
		c.Module = "__main__"
		asMain.Stages[name] = &c
	}
	for _, py := range interpreters {
		name := testinterp.Name(py)
		t.Run(name+"/import", func(t *testing.T) {
			httpServerRun(t, spec, py, "-c", "import http.server as s; s.test(HandlerClass=s.SimpleHTTPRequestHandler, port=0, bind='127.0.0.1')")
		})
		t.Run(name+"/main", func(t *testing.T) {
			httpServerRun(t, &asMain, py, "-m", "http.server", "--bind", "127.0.0.1", "0")
		})
	}
}

// clientCall is one GET as the client saw it.
type clientCall struct {
	start, end int64 // realtime ns
	err        error
}

func httpServerRun(t *testing.T, spec *probes.Spec, py string, args ...string) {
	if _, err := os.Stat(py); err != nil {
		t.Skipf("interpreter %s not installed", py)
	}
	dir := t.TempDir()
	// Large enough that a GET takes milliseconds, so the requests are read
	// while do_GET runs even on a busy machine.
	const size = 8 << 20
	if err := os.WriteFile(filepath.Join(dir, "data.bin"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{"-u"}, args...)...)
	cmd.Dir = dir
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard // one access-log line per request
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`port (\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("server did not say its port: %q", line)
	}
	addr := "127.0.0.1:" + m[1]

	const clients, perClient = 4, 10
	var mu sync.Mutex
	calls := map[string]clientCall{}
	run := func() {
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perClient {
					path := fmt.Sprintf("/data.bin?client=%d&req=%d", c, i)
					cc := clientCall{start: time.Now().UnixNano()}
					cc.err = get(addr, path, size)
					cc.end = time.Now().UnixNano()
					mu.Lock()
					calls[path] = cc
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, spans := traceRun(t, ctx, tracer.Config{PID: cmd.Process.Pid, Spec: spec}, run)
	if !res.TargetExited {
		t.Errorf("session ended with %q, want the target's exit", res.Reason)
	}
	for path, c := range calls {
		if c.err != nil {
			t.Fatalf("GET %s: %v", path, c.err)
		}
	}
	if len(calls) != clients*perClient {
		t.Fatalf("client made %d GETs, want %d", len(calls), clients*perClient)
	}

	seen := map[string]bool{}
	for _, s := range spans {
		if !strings.HasPrefix(s.Name(), "spec_") {
			continue
		}
		path := attrs(s)["rid"].AsString()
		c, ok := calls[path]
		start, end := s.StartTime().UnixNano(), s.EndTime().UnixNano()
		switch {
		case s.Name() != "spec_verify":
			t.Errorf("%s span for %q: the spec has a verify stage only", s.Name(), path)
		case !ok:
			t.Errorf("span for %q: the client never asked for it", path)
		case seen[path]:
			t.Errorf("second span for %q", path)
		case start < c.start-int64(clockSlack) || end > c.end+int64(clockSlack):
			t.Errorf("span for %q [%s, %s] is outside the GET [%s, %s]", path, fmtNs(start), fmtNs(end), fmtNs(c.start), fmtNs(c.end))
		}
		seen[path] = true
	}
	p := res.Python
	if p == nil {
		t.Fatal("no Python stats")
	}
	t.Logf("%d of %d GETs traced with their path; reads %d, failed %d, late %d, retried %d, max lag %v; last error %q",
		len(seen), len(calls), p.Reads, p.Failed, p.Late, p.Retries, p.MaxLag, p.LastError)
	// Every do_GET call is seen (its entry and its exit); one whose path
	// could not be read in time is counted, never guessed.
	if got := p.Reads + p.Failed + p.Late; got != uint64(len(calls)) {
		t.Errorf("reads+failed+late = %d, want one per GET (%d)", got, len(calls))
	}
	if uint64(len(seen)) != p.Reads || len(seen) == 0 {
		t.Errorf("%d spans with a path, %d good reads", len(seen), p.Reads)
	}
	assertNoProbesLeft(t)
}

// get asks for path over HTTP/1.0 and reads to the end of the connection:
// the server closes it after do_GET has returned, so the client's end is
// after the call's. It checks the whole file came back.
func get(addr, path string, size int) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\n\r\n", path); err != nil {
		return err
	}
	resp, err := io.ReadAll(conn)
	if err != nil {
		return err
	}
	head, body, _ := bytes.Cut(resp, []byte("\r\n\r\n"))
	if !bytes.HasPrefix(head, []byte("HTTP/1.0 200 ")) || len(body) != size {
		return fmt.Errorf("got %q and %d bytes, want 200 and %d", bytes.SplitN(head, []byte("\r\n"), 2)[0], len(body), size)
	}
	return nil
}
