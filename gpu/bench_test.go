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

// BenchmarkStageAttrs: what the GPU values cost each stage span (a new
// interval each time, so the cache does not help): a 5 ms stage, which no
// value describes, and a 1 s one, which gets them all.
func BenchmarkStageAttrs(b *testing.B) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[0].pids = []uint32{pid} })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		b.Fatal("begin failed")
	}
	t0 := c.t
	run(s, f, c, 300, 500)
	for _, d := range []time.Duration{5 * time.Millisecond, time.Second} {
		b.Run("stage="+d.String(), func(b *testing.B) {
			start := t0.Add(15 * time.Second)
			for b.Loop() {
				start = start.Add(time.Microsecond)
				if got := len(s.StageAttrs(pid, start, start.Add(d))) > 0; got != (d >= time.Second) {
					b.Fatalf("a %v stage: values %v", d, got)
				}
			}
		})
	}
}

// BenchmarkObserveStep: what counting a request's step for the gpu_window
// spans costs (a batch of 64: one engine step, 64 calls).
func BenchmarkObserveStep(b *testing.B) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) { g[0].pids = []uint32{pid} })
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		b.Fatal("begin failed")
	}
	st := c.t
	i := 0
	for b.Loop() {
		if i%64 == 0 {
			st = st.Add(1500 * time.Microsecond)
		}
		i++
		s.ObserveStep(pid, 1, st, st.Add(time.Millisecond), 3)
		if i%(64*1000) == 0 {
			s.TakeWindows(st)
		}
	}
}
