package gpu

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// Field marks which values of a Sample were read: a GPU that does not support
// one (or a call that failed this time) leaves it out rather than reporting 0.
type Field uint32

const (
	FUtil Field = 1 << iota
	FMemActivity
	FMemUsed
	FSMClock
	FMemClock
	FPower
	FEnergy
	FTemp
	FThrottle
	FSMActivity
	FSMOccupancy
	FTensor
	FDRAM
)

// carried are the fields read on timers of their own (temperature, GPM,
// memory, energy), kept in every sample until read again.
const carried = FTemp | FSMActivity | FSMOccupancy | FTensor | FDRAM | FMemUsed | FEnergy

// Sample is one GPU's state at At. Ratios are 0–1; NVML's percentages are
// converted on the way in so they match the OTel conventions.
type Sample struct {
	At             time.Time
	Have           Field
	Util           float64 // hw.gpu.utilization: a kernel was running
	MemActivity    float64 // device memory being read or written
	MemUsed        uint64  // bytes
	SMClock        uint32  // MHz
	MemClock       uint32  // MHz
	PowerW         float64 // NVML's 1s average on Hopper
	EnergyMJ       uint64  // mJ since the driver loaded
	TempC          float64
	Throttle       uint64 // NVML clock event reasons, a bit mask
	SMActivity     float64
	SMOccupancy    float64
	TensorActivity float64
	DRAMActivity   float64
	// The windows of the values read on their own timers: memory between
	// its last two reads, GPM between its sample pair.
	MemFrom, MemAt time.Time
	GPMFrom, GPMAt time.Time
}

func (s Sample) carry() Sample {
	c := s
	c.Have &= carried
	return c
}

// Clock event (throttle) reasons as nvml.h defines them; kept here so the
// no-cgo build can name them too.
var throttleNames = []struct {
	bit  uint64
	name string
}{
	{0x1, "gpu_idle"},
	{0x2, "applications_clocks_setting"},
	{0x4, "sw_power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal_slowdown"},
	{0x40, "hw_thermal_slowdown"},
	{0x80, "hw_power_brake_slowdown"},
	{0x100, "display_clock_setting"},
}

// ThrottleReasons names the bits of mask, "none" for none.
func ThrottleReasons(mask uint64) string {
	var out []string
	for _, t := range throttleNames {
		if mask&t.bit != 0 {
			out = append(out, t.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

// ring keeps one GPU's samples in time order.
type ring struct {
	buf  []Sample
	next int
	n    int
}

func newRing(size int) *ring { return &ring{buf: make([]Sample, size)} }

func (r *ring) push(s Sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
}

// at returns the i-th oldest sample.
func (r *ring) at(i int) *Sample {
	return &r.buf[(r.next-r.n+i+len(r.buf))%len(r.buf)]
}

func (r *ring) latest() (Sample, bool) {
	if r.n == 0 {
		return Sample{}, false
	}
	return *r.at(r.n - 1), true
}

// search returns the index of the first sample taken after t.
func (r *ring) search(t time.Time) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).At.After(t) })
}

// callStats counts NVML calls by function: the bench reports the rate, the
// device check the latency.
type callStats struct {
	mu sync.Mutex
	m  map[string]*CallStat
}

// CallStat is what one NVML function cost.
type CallStat struct {
	Calls, Errors uint64
	Total, Max    time.Duration
}

func newCallStats() *callStats { return &callStats{m: map[string]*CallStat{}} }

func (c *callStats) add(name string, d time.Duration, failed bool) {
	c.mu.Lock()
	st := c.m[name]
	if st == nil {
		st = &CallStat{}
		c.m[name] = st
	}
	st.Calls++
	st.Total += d
	st.Max = max(st.Max, d)
	if failed {
		st.Errors++
	}
	c.mu.Unlock()
}

// Calls returns a copy of the NVML call counts so far, by function.
func (s *Sampler) Calls() map[string]CallStat {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	out := make(map[string]CallStat, len(s.calls.m))
	for k, v := range s.calls.m {
		out[k] = *v
	}
	return out
}
