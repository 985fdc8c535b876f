package pyproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// evalTarget is testdata/evalfixture.py, blocked inside stage(batch).
type evalTarget struct {
	pid        int
	TID        int                        `json:"tid"`
	Batch      uint64                     `json:"batch"`
	StageCode  uint64                     `json:"stage_code"`
	WaitCode   uint64                     `json:"wait_code"`
	UnusedCode uint64                     `json:"unused_code"`
	Version    []int                      `json:"version"`
	Values     map[string]json.RawMessage `json:"values"`
	stdin      io.WriteCloser
	stdout     *bufio.Reader
}

func startEvalTarget(t testing.TB, python string, nreqs string) *evalTarget {
	t.Helper()
	out := filepath.Join(t.TempDir(), "expected.json")
	fx := startFixture(t, python, nil, "testdata/evalfixture.py", out, nreqs)
	cmd, stdin, stdout := fx.cmd, fx.stdin, fx.stdout
	tg := &evalTarget{pid: cmd.Process.Pid, stdin: stdin, stdout: bufio.NewReader(stdout)}
	if line := tg.readLine(t); line != "ready" {
		t.Fatalf("%s: target said %q", python, line)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, tg); err != nil {
		t.Fatal(err)
	}
	return tg
}

func (tg *evalTarget) readLine(t testing.TB) string {
	t.Helper()
	return readLine(t, tg.stdout)
}

// readLine reads a line the target prints, failing the test when it stays
// silent.
func readLine(t testing.TB, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := r.ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		return line
	case <-time.After(30 * time.Second):
		t.Fatal("target silent for 30s")
	}
	return ""
}

// waitFrame retries while the target has not reached the call yet.
func waitFrame(t testing.TB, p *Process, tid int, code uint64) *Frame {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := p.FindFrame(tid, code)
		var nf *FrameNotFoundError
		if err == nil || !errors.As(err, &nf) || time.Now().After(deadline) {
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// canon re-encodes JSON so that Python's and Go's spellings compare equal.
func canon(t *testing.T, raw []byte) string {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	out, _ := json.Marshal(tagFloats(v))
	return string(out)
}

// tagFloats keeps 1.0 and 1 apart: Python writes floats with a '.' or an
// exponent; Go's float64 1 marshals as 1.
func tagFloats(v any) any {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			f, _ := x.Float64()
			return "float:" + strconv.FormatFloat(f, 'g', -1, 64)
		}
	case float64:
		return "float:" + strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		for i := range x {
			x[i] = tagFloats(x[i])
		}
	case []Value:
		out := make([]any, len(x))
		for i := range x {
			out[i] = tagFloats(x[i])
		}
		return out
	case map[string]any:
		for k := range x {
			x[k] = tagFloats(x[k])
		}
	}
	return v
}

func TestEval(t *testing.T) {
	for _, in := range interpreters {
		t.Run(in.name, func(t *testing.T) {
			tg := startEvalTarget(t, in.path, "32")
			p, err := Attach(tg.pid)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			batch := checkFrames(t, p, tg)
			for path, want := range tg.Values {
				v, err := p.Eval(batch, path)
				if err != nil {
					t.Errorf("Eval(%s): %v", path, err)
					continue
				}
				got, _ := json.Marshal(tagFloats(v))
				if g, w := canon(t, got), canon(t, want); g != w {
					t.Errorf("Eval(%s) = %s, want %s", path, g, w)
				}
			}
			checkEvalErrors(t, p, batch)
			checkDamagedReplay(t, p, tg)
			checkReread(t, p, tg)
			if p.Stats.Fallbacks != 0 {
				t.Errorf("%d dict lookups fell back to a scan", p.Stats.Fallbacks)
			}
		})
	}
}

// checkFrames: stage(batch) called wait_line(batch, 7), which blocks with
// batch and k in cells (a lambda captures them).
func checkFrames(t *testing.T, p *Process, tg *evalTarget) uint64 {
	f := waitFrame(t, p, tg.TID, tg.StageCode)
	if f.Depth != 1 || f.Thread.TID != tg.TID {
		t.Errorf("stage frame at depth %d on TID %d, want 1 on %d", f.Depth, f.Thread.TID, tg.TID)
	}
	batch, err := p.Local(f, "batch")
	if err != nil || batch != tg.Batch {
		t.Fatalf("Local(stage, batch) = %#x, %v; want %#x", batch, err, tg.Batch)
	}
	names, err := p.LocalNames(f)
	if err != nil || len(names) < 2 || names[0] != "batch" {
		t.Errorf("LocalNames(stage) = %v, %v", names, err)
	}
	if _, err := p.Local(f, "line"); err == nil || !strings.Contains(err.Error(), "unbound") {
		t.Errorf("Local(stage, line) before assignment: %v", err)
	}
	if _, err := p.Local(f, "btach"); err == nil || !strings.Contains(err.Error(), "locals: batch") {
		t.Errorf("Local(stage, btach): %v", err)
	}
	w := waitFrame(t, p, tg.TID, tg.WaitCode)
	if w.Depth != 0 {
		t.Errorf("wait_line frame at depth %d", w.Depth)
	}
	if b, err := p.Local(w, "batch"); err != nil || b != tg.Batch {
		t.Errorf("Local(wait_line, batch) through its cell = %#x, %v", b, err)
	}
	if k, err := p.Local(w, "k"); err != nil {
		t.Error(err)
	} else if v, err := p.Eval(k, ""); err != nil || v != int64(7) {
		t.Errorf("wait_line's k = %v, %v", v, err)
	}
	_, err = p.FindFrame(tg.TID, tg.UnusedCode)
	var nf *FrameNotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "wait_line <- stage <- main <- <module>") {
		t.Errorf("FindFrame(unused): %v", err)
	}
	if _, err := p.FindFrame(tg.TID+100000, tg.StageCode); err == nil || !strings.Contains(err.Error(), "no Python thread") {
		t.Errorf("FindFrame(bad TID): %v", err)
	}
	stale := *f
	stale.Code = tg.UnusedCode
	if _, err := p.Local(&stale, "batch"); err == nil || !strings.Contains(err.Error(), "no longer runs") {
		t.Errorf("Local on a frame running other code: %v", err)
	}
	t.Logf("stage frame %#x depth %d; locals %v", f.Addr, f.Depth, names)
	return batch
}

func checkEvalErrors(t *testing.T, p *Process, batch uint64) {
	for _, tc := range []struct{ path, want string }{
		{"reqs[0].ridd", `reqs[0].ridd: on a Req: no attribute "ridd"; near: rid`},
		{"reqs[*].late", `reqs[0].late: on a Req: no attribute "late"`},
		{"reqs[99].rid", `reqs[99]: on a list: index 99 out of range (32 items)`},
		{"reqs[0].rid[0]", `reqs[0].rid[0]: on a str: not a list, tuple or dict`},
		{"reqs.rid", `reqs.rid: on a list: no attribute "rid"`},
		{"extra[0]", `extra[0]: on a dict: a dict takes ["key"] or [*] (its keys), not [0]`},
		{"slot_req.unset", `slot_req.unset: on a SlotReq: slot "unset" is not set`},
		{"odd.gone", `odd.gone: on a Node: no attribute "gone"`},
		{"is_empty", `is_empty: on a ScheduleBatch: "is_empty" is a property`},
		{"huge", `huge: on a int: int of 4 digits is wider than 64 bits`},
		{`extra["nope"]`, `extra["nope"]: on a dict: no key "nope"`},
		{`reqs["x"]`, `reqs["x"]: on a list: not a dict`},
		{"module_ref.NOPE", `module_ref.NOPE: on a module: module_ref has no attribute "NOPE"`},
		{"reqs[", "unclosed ["},
		{"reqs[x]", `bad index "x"`},
		{"reqs..rid", "empty attribute name"},
	} {
		_, err := p.Eval(batch, tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Eval(%s): %v\n  want %s", tc.path, err, tc.want)
		}
	}
	_, err := p.Eval(batch, "reqs[0].ridd")
	t.Logf("error read: %v", err)
}
