//go:build cgo

package gpu

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

func totalCalls(s *Sampler) uint64 {
	var n uint64
	for _, st := range s.Calls() {
		n += st.Calls
	}
	return n
}

// BenchmarkSampler: the time one sampling round takes against the mock (the
// sampler's own cost; real NVML calls add their latency, which
// scripts/gpu-check.sh measures) and the NVML calls per second the default
// intervals make, with the PID on 1 and on 8 of the 8 GPUs.
func BenchmarkSampler(b *testing.B) {
	for _, used := range []int{1, 8} {
		b.Run(fmt.Sprintf("gpus=%d", used), func(b *testing.B) {
			f := newFakeH200()
			f.set(func(g []*fakeGPU) {
				for i := 0; i < used; i++ {
					g[i].pids = []uint32{pid}
				}
			})
			s, c := newTestSampler(f, DefaultOptions())
			if !s.begin(pid, &bytes.Buffer{}) {
				b.Fatal("begin failed")
			}
			before := totalCalls(s)
			const rounds = 600 // one minute at 100ms
			for i := 0; i < rounds; i++ {
				c.t = c.t.Add(100 * time.Millisecond)
				s.round(c.t)
			}
			perSec := float64(totalCalls(s)-before) / 60
			for b.Loop() {
				c.t = c.t.Add(100 * time.Millisecond)
				s.round(c.t)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(used), "ns/gpu-sample")
			b.ReportMetric(perSec, "nvml-calls/s")
		})
	}
}

// BenchmarkStageAttrs: what the GPU window costs each stage span (a new
// interval each time, so the cache does not help).
func BenchmarkStageAttrs(b *testing.B) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[0].pids = []uint32{pid} })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		b.Fatal("begin failed")
	}
	t0 := c.t
	run(s, f, c, 300, 500)
	start := t0.Add(15 * time.Second)
	for b.Loop() {
		start = start.Add(time.Microsecond)
		if len(s.StageAttrs(pid, start, start.Add(5*time.Millisecond))) == 0 {
			b.Fatal("no attributes")
		}
	}
}
