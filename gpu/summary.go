package gpu

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// aggregate is one GPU over the session, for the final summary.
type aggregate struct {
	n                  int
	utilSum, utilMax   float64
	nUtil, nPower, nSM int
	powerSum, powerMax float64
	smSum              float64
	smMin, smMax       uint32
	tempMax            float64
	memMax             uint64
	firstMJ, lastMJ    uint64
	haveEnergy         bool
	throttled          map[string]int // samples with each reason
}

func (a *aggregate) add(s Sample) {
	a.n++
	if s.Have&FUtil != 0 {
		a.nUtil++
		a.utilSum += s.Util
		a.utilMax = max(a.utilMax, s.Util)
	}
	if s.Have&FPower != 0 {
		a.nPower++
		a.powerSum += s.PowerW
		a.powerMax = max(a.powerMax, s.PowerW)
	}
	if s.Have&FSMClock != 0 {
		if a.smMin == 0 || s.SMClock < a.smMin {
			a.smMin = s.SMClock
		}
		a.smMax = max(a.smMax, s.SMClock)
	}
	if s.Have&FSMActivity != 0 {
		a.nSM++
		a.smSum += s.SMActivity
	}
	if s.Have&FTemp != 0 {
		a.tempMax = max(a.tempMax, s.TempC)
	}
	if s.Have&FMemUsed != 0 {
		a.memMax = max(a.memMax, s.MemUsed)
	}
	if s.Have&FEnergy != 0 {
		if !a.haveEnergy {
			a.firstMJ, a.haveEnergy = s.EnergyMJ, true
		}
		a.lastMJ = s.EnergyMJ
	}
	if s.Have&FThrottle != 0 {
		for _, t := range throttleNames {
			if s.Throttle&t.bit != 0 && t.bit != 0x1 { // idle is not a slowdown
				if a.throttled == nil {
					a.throttled = map[string]int{}
				}
				a.throttled[t.name]++
			}
		}
	}
}

const gib = 1 << 30

// LiveColumns is the GPU part of the live status line: one GPU in full,
// several as mean utilisation, lowest SM clock, total power.
func (s *Sampler) LiveColumns() string {
	l := s.latest()
	if len(l) == 0 {
		return ""
	}
	var util, power float64
	var sm uint32
	var thr uint64
	for _, d := range l {
		util += d.smp.Util / float64(len(l))
		power += d.smp.PowerW
		if sm == 0 || (d.smp.SMClock > 0 && d.smp.SMClock < sm) {
			sm = d.smp.SMClock
		}
		thr |= d.smp.Throttle &^ 0x1
	}
	out := fmt.Sprintf("gpu util %.0f%%", 100*util)
	if len(l) > 1 {
		out = fmt.Sprintf("%d gpus util %.0f%%", len(l), 100*util)
	} else if d := l[0]; d.smp.Have&FSMActivity != 0 {
		out += fmt.Sprintf(" sm %.0f%% tensor %.0f%%", 100*d.smp.SMActivity, 100*d.smp.TensorActivity)
	}
	out += fmt.Sprintf(" %dMHz %.0fW", sm, power)
	if len(l) == 1 && l[0].dev.MemTotal > 0 {
		out += fmt.Sprintf(" mem %.1f/%.0fGiB", float64(l[0].smp.MemUsed)/gib, float64(l[0].dev.MemTotal)/gib)
	}
	if thr != 0 {
		out += " throttled:" + ThrottleReasons(thr)
	}
	return out
}

// SummaryLines describe each GPU the PID used over the session, or why GPU
// state was off.
func (s *Sampler) SummaryLines() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.rings == nil || (!s.active && s.off != "") {
		return []string{"GPU state off: " + s.off}
	}
	var out []string
	for i, a := range s.aggs {
		if a.n == 0 {
			continue
		}
		d := s.devs[i]
		var b strings.Builder
		fmt.Fprintf(&b, "GPU %d %s (%s): %d samples", d.Index, d.Name, d.UUID, a.n)
		if a.nUtil > 0 {
			fmt.Fprintf(&b, ", util mean %.0f%% max %.0f%%", 100*a.utilSum/float64(a.nUtil), 100*a.utilMax)
		}
		if a.nSM > 0 {
			fmt.Fprintf(&b, ", SM activity mean %.0f%%", 100*a.smSum/float64(a.nSM))
		}
		if a.smMax > 0 {
			fmt.Fprintf(&b, ", SM clock %d-%d MHz", a.smMin, a.smMax)
		}
		if a.nPower > 0 {
			fmt.Fprintf(&b, ", power mean %.0f W max %.0f W", a.powerSum/float64(a.nPower), a.powerMax)
		}
		if a.haveEnergy && a.lastMJ >= a.firstMJ {
			fmt.Fprintf(&b, ", energy %.1f J", float64(a.lastMJ-a.firstMJ)/1000)
		}
		if a.tempMax > 0 {
			fmt.Fprintf(&b, ", temp max %.0f C", a.tempMax)
		}
		if d.MemTotal > 0 {
			fmt.Fprintf(&b, ", memory max %.1f/%.0f GiB", float64(a.memMax)/gib, float64(d.MemTotal)/gib)
		}
		for _, t := range throttleNames {
			if n := a.throttled[t.name]; n > 0 {
				fmt.Fprintf(&b, ", %s %.0f%% of samples", t.name, 100*float64(n)/float64(a.n))
			}
		}
		out = append(out, b.String())
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("GPU state: PID %d had no compute context on any GPU", s.pid))
	}
	return append(out, costLine(s.Calls()))
}

// costLine is what NVML cost the session: every call, and the functions
// that took the most time with their calls, mean and longest call. Each call
// holds a driver lock the server needs; the longest is what a CUDA call of
// the server may have waited.
func costLine(calls map[string]CallStat) string {
	type fn struct {
		name string
		st   CallStat
	}
	var fns []fn
	var n uint64
	var total time.Duration
	for name, st := range calls {
		fns = append(fns, fn{name, st})
		n += st.Calls
		total += st.Total
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].st.Total > fns[j].st.Total })
	var b strings.Builder
	fmt.Fprintf(&b, "NVML cost: %d calls, %s in all", n, total.Round(time.Microsecond))
	for i, f := range fns {
		if i == 4 || f.st.Calls == 0 {
			break
		}
		fmt.Fprintf(&b, "; %s %d calls mean %s max %s", f.name, f.st.Calls,
			(f.st.Total / time.Duration(f.st.Calls)).Round(time.Microsecond), f.st.Max.Round(time.Microsecond))
	}
	return b.String()
}

// Active reports whether GPU state is being sampled.
func (s *Sampler) Active() bool {
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.active
}

// Used returns the GPUs the PID has a compute context on.
func (s *Sampler) Used() []Device {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Device
	for i, u := range s.used {
		if u {
			out = append(out, s.devs[i])
		}
	}
	return out
}
