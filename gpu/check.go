//go:build cgo

package gpu

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// CheckOptions drive the device check (cmd/gpucheck, scripts/gpu-check.sh).
type CheckOptions struct {
	Options
	PID      int // 0: every GPU
	Duration time.Duration
}

// checkFields are the values whose rate of change the check reports: a
// counter that moves every 100ms is not worth sampling every 10ms.
var checkFields = []struct {
	name string
	f    Field
	get  func(*Sample) float64
}{
	{"utilization", FUtil, func(s *Sample) float64 { return s.Util }},
	{"memory.activity", FMemActivity, func(s *Sample) float64 { return s.MemActivity }},
	{"memory.used", FMemUsed, func(s *Sample) float64 { return float64(s.MemUsed) }},
	{"clock.sm", FSMClock, func(s *Sample) float64 { return float64(s.SMClock) }},
	{"clock.memory", FMemClock, func(s *Sample) float64 { return float64(s.MemClock) }},
	{"power", FPower, func(s *Sample) float64 { return s.PowerW }},
	{"energy", FEnergy, func(s *Sample) float64 { return float64(s.EnergyMJ) }},
	{"temperature", FTemp, func(s *Sample) float64 { return s.TempC }},
	{"throttle", FThrottle, func(s *Sample) float64 { return float64(s.Throttle) }},
	{"sm_activity", FSMActivity, func(s *Sample) float64 { return s.SMActivity }},
	{"sm_occupancy", FSMOccupancy, func(s *Sample) float64 { return s.SMOccupancy }},
	{"tensor_activity", FTensor, func(s *Sample) float64 { return s.TensorActivity }},
	{"dram_activity", FDRAM, func(s *Sample) float64 { return s.DRAMActivity }},
}

type changes struct {
	n, changed int
	last       time.Time
	gaps       []time.Duration
}

// Check samples the real driver for o.Duration and writes each NVML call's
// latency, the last values per GPU, and how often each value changed.
func Check(w io.Writer, o CheckOptions) error { return check(nvml.New(), w, o) }

func check(lib nvml.Interface, w io.Writer, o CheckOptions) error {
	t := time.Now()
	if r := lib.Init(); r != nvml.SUCCESS {
		return initError(r)
	}
	fmt.Fprintf(w, "Init %s\n", time.Since(t).Round(time.Microsecond))
	drv, _ := lib.SystemGetDriverVersion()
	ver, _ := lib.SystemGetNVMLVersion()
	fmt.Fprintf(w, "driver %s, NVML %s\n", drv, ver)
	s := New(lib, o.Options) // Init again inside: NVML counts references
	if !s.begin(o.PID, w) {
		lib.Shutdown()
		return fmt.Errorf("sampler did not start")
	}
	defer lib.Shutdown()
	defer s.b.close()
	ch := map[int][]changes{}
	prev := map[int]Sample{}
	end := time.Now().Add(o.Duration)
	for next := time.Now(); next.Before(end); next = next.Add(o.Interval) {
		time.Sleep(time.Until(next))
		if !s.safeRound(s.now()) {
			return fmt.Errorf("sampling failed")
		}
		for _, l := range s.latest() {
			c := ch[l.dev.Index]
			if c == nil {
				c = make([]changes, len(checkFields))
				ch[l.dev.Index] = c
			}
			p, seen := prev[l.dev.Index]
			for i, f := range checkFields {
				if l.smp.Have&f.f == 0 {
					continue
				}
				c[i].n++
				if seen && p.Have&f.f != 0 && f.get(&p) != f.get(&l.smp) {
					c[i].changed++
					if !c[i].last.IsZero() {
						c[i].gaps = append(c[i].gaps, l.smp.At.Sub(c[i].last))
					}
					c[i].last = l.smp.At
				}
			}
			prev[l.dev.Index] = l.smp
		}
	}
	printCheck(w, s, o, ch, prev)
	return nil
}

func printCheck(w io.Writer, s *Sampler, o CheckOptions, ch map[int][]changes, last map[int]Sample) {
	calls := s.Calls()
	names := make([]string, 0, len(calls))
	for n := range calls {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "\nNVML calls over %s at interval %s:\n  %-40s %8s %8s %10s %10s\n", o.Duration, o.Interval, "function", "calls", "errors", "mean", "max")
	var total uint64
	for _, n := range names {
		c := calls[n]
		total += c.Calls
		fmt.Fprintf(w, "  %-40s %8d %8d %10s %10s\n", n, c.Calls, c.Errors, (c.Total / time.Duration(c.Calls)).Round(100*time.Nanosecond), c.Max.Round(100*time.Nanosecond))
	}
	fmt.Fprintf(w, "  %.0f calls/s\n", float64(total)/o.Duration.Seconds())
	for _, d := range s.Used() {
		smp := last[d.Index]
		fmt.Fprintf(w, "\nGPU %d %s %s (memory %d MiB)\n  last: util %.2f mem.activity %.2f mem.used %d MiB sm %d MHz mem %d MHz power %.1f W energy %d mJ temp %.0f C throttle %s sm_activity %.2f occupancy %.2f tensor %.2f dram %.2f (fields %b)\n",
			d.Index, d.Name, d.UUID, d.MemTotal>>20, smp.Util, smp.MemActivity, smp.MemUsed>>20, smp.SMClock, smp.MemClock, smp.PowerW, smp.EnergyMJ, smp.TempC,
			ThrottleReasons(smp.Throttle), smp.SMActivity, smp.SMOccupancy, smp.TensorActivity, smp.DRAMActivity, smp.Have)
		fmt.Fprintf(w, "  %-16s %8s %8s %12s\n", "value", "samples", "changes", "median gap")
		for i, f := range checkFields {
			c := ch[d.Index][i]
			if c.n == 0 {
				fmt.Fprintf(w, "  %-16s not supported\n", f.name)
				continue
			}
			gap := "-"
			if len(c.gaps) > 0 {
				sort.Slice(c.gaps, func(a, b int) bool { return c.gaps[a] < c.gaps[b] })
				gap = c.gaps[len(c.gaps)/2].Round(time.Millisecond).String()
			}
			fmt.Fprintf(w, "  %-16s %8d %8d %12s\n", f.name, c.n, c.changed, gap)
		}
	}
}
