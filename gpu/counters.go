package gpu

import (
	"fmt"
	"time"
)

// Counter is one reading for a counter track (Perfetto draws them beside
// the thread tracks, as Nsight Systems does): the value read at At.
type Counter struct {
	Track, Unit string
	At          time.Time
	Value       float64
}

const maxPending = 1 << 16 // samples waiting for TakeCounters

// KeepCounters makes the sampler keep every sample until TakeCounters.
func (s *Sampler) KeepCounters() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.counting = true
	s.mu.Unlock()
}

// keep queues a sample for TakeCounters. Call with s.mu held.
func (s *Sampler) keep(dev int, smp Sample) {
	if !s.counting {
		return
	}
	if len(s.pending) == maxPending {
		s.pending = s.pending[1:]
	}
	s.pending = append(s.pending, devSample{dev: s.devs[dev], smp: smp})
}

// TakeCounters returns the readings of the samples taken since the last call.
// A value read on a timer of its own (memory, GPM) is given when read.
func (s *Sampler) TakeCounters() []Counter {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	var out []Counter
	for _, p := range pending {
		smp := &p.smp
		add := func(f Field, name, unit string, v float64) {
			if smp.Have&f != 0 {
				out = append(out, Counter{Track: fmt.Sprintf("GPU %d %s", p.dev.Index, name), Unit: unit, At: smp.At, Value: v})
			}
		}
		add(FPower, "power", "W", smp.PowerW)
		add(FUtil, "utilization", "%", 100*smp.Util)
		add(FMemActivity, "memory activity", "%", 100*smp.MemActivity)
		add(FSMClock, "SM clock", "MHz", float64(smp.SMClock))
		add(FMemClock, "memory clock", "MHz", float64(smp.MemClock))
		add(FThrottle, "throttled", "reasons", float64(smp.Throttle&^0x1)) // idle is not a slowdown
		if smp.MemAt.Equal(smp.At) {
			add(FMemUsed, "memory used", "GiB", float64(smp.MemUsed)/gib)
		}
		if smp.GPMAt.Equal(smp.At) {
			add(FSMActivity, "SM activity", "%", 100*smp.SMActivity)
			add(FTensor, "tensor activity", "%", 100*smp.TensorActivity)
			add(FDRAM, "DRAM activity", "%", 100*smp.DRAMActivity)
		}
	}
	return out
}
