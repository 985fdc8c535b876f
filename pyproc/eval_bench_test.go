package pyproc

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// checkReread: a new stage call after the target changed a field reads the
// new value.
func checkReread(t *testing.T, p *Process, tg *evalTarget) {
	io.WriteString(tg.stdin, "bump\n")
	var ack struct {
		N int64 `json:"spec_verify_ct"`
	}
	if err := json.Unmarshal([]byte(tg.readLine(t)), &ack); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := waitFrame(t, p, tg.TID, tg.StageCode)
		b, err := p.Local(f, "batch")
		var v Value
		if err == nil {
			v, err = p.Eval(b, "reqs[0].spec_verify_ct")
		}
		if err == nil && v == ack.N {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after bump: %v, %v; want %d", v, err, ack.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countingMemory counts calls (a vectored read of many segments is one),
// for the benchmark's reads/op.
type countingMemory struct {
	r Memory
	n int
}

func (c *countingMemory) ReadAt(b []byte, addr uint64) error {
	c.n++
	return c.r.ReadAt(b, addr)
}

func (c *countingMemory) ReadV(rs []Read) error {
	c.n++
	return readV(c.r, rs)
}

// BenchmarkEval times what a watchpoint hit on verify(self, batch) costs in
// user space: find the frame, read the batch argument, read every rid of a
// 32-request batch.
func BenchmarkEval(b *testing.B) {
	for _, in := range interpreters {
		b.Run(in.name, func(b *testing.B) {
			tg := startEvalTarget(b, in.path, "32")
			p, err := Attach(tg.pid)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			cm := &countingMemory{r: p.m.r}
			p.m = mem{cm}
			waitFrame(b, p, tg.TID, tg.StageCode)
			cm.n = 0
			for b.Loop() {
				f, err := p.FindFrame(tg.TID, tg.StageCode)
				if err != nil {
					b.Fatal(err)
				}
				batch, err := p.Local(f, "batch")
				if err != nil {
					b.Fatal(err)
				}
				v, err := p.Eval(batch, "reqs[*].rid")
				if err != nil || len(v.([]Value)) != 32 {
					b.Fatal(v, err)
				}
			}
			b.ReportMetric(float64(cm.n)/float64(b.N), "reads/op")
		})
	}
}

// BenchmarkEvalBatch reads the rids of a batch of N requests on CPython
// 3.12, in batches (Eval) and item by item (EvalItemByItem): requests that
// keep their attributes in values over shared keys (reqs), and requests with
// a dict of their own (bigreqs: more attributes than shared keys hold, as
// SGLang's Req). bench/pyread is the same measured side by side.
func BenchmarkEvalBatch(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			tg := startBatchTarget(b, interpreters[2].path, n)
			p, err := Attach(tg.pid)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			for _, path := range []string{"reqs[*].rid", "bigreqs[*].rid"} {
				for _, mode := range []struct {
					name string
					eval func(uint64, string) (Value, error)
				}{{"batch", p.Eval}, {"item-by-item", p.EvalItemByItem}} {
					b.Run(strings.TrimSuffix(path, "[*].rid")+"/"+mode.name, func(b *testing.B) {
						start := p.Stats.Reads
						for b.Loop() {
							if v, err := mode.eval(tg.Batch, path); err != nil || len(v.([]Value)) != n {
								b.Fatal(v, err)
							}
						}
						b.ReportMetric(float64(p.Stats.Reads-start)/float64(b.N), "syscalls/op")
					})
				}
			}
		})
	}
}
