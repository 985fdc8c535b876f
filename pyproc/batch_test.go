package pyproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// batchTarget is testdata/batchfixture.py: lists of N requests of every
// instance layout, and what Python reads at each path.
type batchTarget struct {
	pid    int
	out    string
	stdin  io.Writer
	stdout *bufio.Reader
	Batch  uint64                     `json:"batch"`
	Values map[string]json.RawMessage `json:"values"`
}

func startBatchTarget(t testing.TB, python string, n int) *batchTarget {
	t.Helper()
	out := filepath.Join(t.TempDir(), "values.json")
	fx := startFixture(t, python, nil, "testdata/batchfixture.py", out, fmt.Sprint(n))
	tg := &batchTarget{pid: fx.cmd.Process.Pid, out: out, stdin: fx.stdin, stdout: bufio.NewReader(fx.stdout)}
	tg.load(t)
	return tg
}

// load waits for the target's "ready" and reads what it wrote.
func (tg *batchTarget) load(t testing.TB) {
	t.Helper()
	if line := readLine(t, tg.stdout); line != "ready" {
		t.Fatalf("target said %q", line)
	}
	raw, err := os.ReadFile(tg.out)
	if err != nil {
		t.Fatal(err)
	}
	tg.Values = nil
	if err := json.Unmarshal(raw, tg); err != nil {
		t.Fatal(err)
	}
}

// mutate has the target change its objects (batchfixture.py's mutate).
func (tg *batchTarget) mutate(t testing.TB) {
	t.Helper()
	io.WriteString(tg.stdin, "mutate\n")
	tg.load(t)
}

// TestBatchEval reads every path of batchfixture.py over 256 requests on
// each interpreter: Eval must give what Python reads and what
// EvalItemByItem gives, in O(1) reads per level, and again (caches warm)
// after the target changed class attributes, __class__, list sizes, dict
// keys, slots and replaced a class (types_test for the cache itself).
func TestBatchEval(t *testing.T) {
	for _, in := range interpreters {
		t.Run(in.name, func(t *testing.T) {
			tg := startBatchTarget(t, in.path, 256)
			p, err := Attach(tg.pid)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for round := 0; round < 3; round++ {
				if round == 2 {
					tg.mutate(t)
				}
				checkBatchValues(t, p, tg, fmt.Sprintf("round %d", round))
			}
			checkBatchReads(t, p, tg)
		})
	}
}

func checkBatchValues(t *testing.T, p *Process, tg *batchTarget, round string) {
	for path, want := range tg.Values {
		v, err := p.Eval(tg.Batch, path)
		if err != nil {
			t.Errorf("%s: Eval(%s): %v", round, path, err)
			continue
		}
		got, _ := json.Marshal(tagFloats(v))
		if g, w := canon(t, got), canon(t, want); g != w {
			t.Errorf("%s: Eval(%s) = %.300s\n  want %.300s", round, path, g, w)
		}
		if old, err := p.EvalItemByItem(tg.Batch, path); err != nil || !reflect.DeepEqual(old, v) {
			t.Errorf("%s: EvalItemByItem(%s) = %.200v, %v; Eval gave %.200v", round, path, old, err, v)
		}
	}
}

// checkBatchReads: 256 requests' rids take a few system calls per level of
// the path, not a few per request.
func checkBatchReads(t *testing.T, p *Process, tg *batchTarget) {
	for _, path := range []string{"reqs[*].rid", "sreqs[*].n", "num_scheduled_tokens[*]", "nreqs[*].rid", "groups[*].reqs[*].rid", "bigreqs[*].rid", "bigreqs[*].field_59"} {
		// A few reads for each step and the conversion at the end, and a few
		// more for an odd object (the first of a type, one whose dict the
		// class does not share): far fewer than one per request.
		steps, _ := parsePath(path)
		most := 8 * (len(steps) + 1)
		start := p.Stats.Reads
		if _, err := p.Eval(tg.Batch, path); err != nil {
			t.Fatal(err)
		}
		batched := p.Stats.Reads - start
		start = p.Stats.Reads
		if _, err := p.EvalItemByItem(tg.Batch, path); err != nil {
			t.Fatal(err)
		}
		itemwise := p.Stats.Reads - start
		t.Logf("%s: %d system calls batched, %d item by item", path, batched, itemwise)
		if batched > most || itemwise < 256 {
			t.Errorf("%s: %d system calls batched (want at most %d), %d item by item", path, batched, most, itemwise)
		}
	}
}
