package gpu

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics exports the latest GPU samples and ratios derived from them and
// the speculative-decoding counts, each collection (the counts themselves
// are package specmetrics' counters).
type Metrics struct {
	s *Sampler // nil or inactive: the spec metrics alone

	mu                          sync.Mutex
	accepted, drafted, verifies int64
	// at the previous collection: the ratios cover the time since then, which
	// is what a dashboard plots, not the session's average.
	prevAccepted, prevDrafted, prevVerifies int64
	prevEnergy                              map[string]uint64 // mJ by GPU UUID
}

// ObserveSpec records the session's cumulative counts (from the span
// builder's stats, on the tracer's goroutine).
func (m *Metrics) ObserveSpec(accepted, drafted int64, verifies uint64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.accepted, m.drafted, m.verifies = accepted, drafted, int64(verifies)
	m.mu.Unlock()
}

type instruments struct {
	util, memAct, memUtil, power, temp, smAct, smOcc, tensor, dram metric.Float64ObservableGauge
	energy                                                         metric.Float64ObservableCounter
	memUsage, memLimit                                             metric.Int64ObservableUpDownCounter
	smClock, memClock, throttle                                    metric.Int64ObservableGauge
	rate, perVerify, perToken                                      metric.Float64ObservableGauge
}

// RegisterMetrics creates the instruments on meter. s may be nil (no GPU).
func RegisterMetrics(meter metric.Meter, s *Sampler) (*Metrics, error) {
	m := &Metrics{s: s, prevEnergy: map[string]uint64{}}
	var in instruments
	var errs []error
	fg := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := meter.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	ig := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	iu := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		c, err := meter.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	in.util = fg("hw.gpu.utilization", "1", "Fraction of time a kernel was running (NVML)")
	in.memAct = fg("specprobe.gpu.memory.activity", "1", "Fraction of time device memory was read or written (NVML)")
	in.memUsage = iu("hw.gpu.memory.usage", "By", "GPU memory used")
	in.memLimit = iu("hw.gpu.memory.limit", "By", "GPU memory size")
	in.memUtil = fg("hw.gpu.memory.utilization", "1", "Fraction of GPU memory used")
	in.smClock = ig("specprobe.gpu.clock.sm", "MHz", "SM clock")
	in.memClock = ig("specprobe.gpu.clock.memory", "MHz", "Memory clock")
	in.power = fg("hw.power", "W", "GPU power draw (NVML's average)")
	var err error
	in.energy, err = meter.Float64ObservableCounter("hw.energy", metric.WithUnit("J"), metric.WithDescription("GPU energy since the driver loaded"))
	errs = append(errs, err)
	in.temp = fg("hw.temperature", "Cel", "GPU temperature")
	in.throttle = ig("specprobe.gpu.throttle", "1", "1 while the clock event (throttle) reason in specprobe.gpu.throttle_reason is active")
	in.smAct = fg("specprobe.gpu.sm_activity", "1", "Fraction of SMs busy (GPM)")
	in.smOcc = fg("specprobe.gpu.sm_occupancy", "1", "Fraction of warp slots occupied (GPM)")
	in.tensor = fg("specprobe.gpu.tensor_activity", "1", "Fraction of time a tensor pipe was active (GPM)")
	in.dram = fg("specprobe.gpu.dram_activity", "1", "Fraction of DRAM bandwidth used (GPM)")
	in.rate = fg("specprobe.spec.acceptance_rate", "1", "Accepted over drafted tokens since the previous export")
	in.perVerify = fg("specprobe.spec.accepted_tokens_per_verify", "{token}", "Accepted tokens per verify since the previous export")
	in.perToken = fg("specprobe.spec.energy_per_accepted_token", "J/{token}", "Energy of the traced process's GPUs per accepted token since the previous export")
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		m.observe(o, &in)
		return nil
	}, in.util, in.memAct, in.memUsage, in.memLimit, in.memUtil, in.smClock, in.memClock, in.power, in.energy,
		in.temp, in.throttle, in.smAct, in.smOcc, in.tensor, in.dram,
		in.rate, in.perVerify, in.perToken)
	return m, err
}

func (m *Metrics) observe(o metric.Observer, in *instruments) {
	latest := m.s.latest()
	var energyMJ uint64
	haveEnergy := len(latest) > 0
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range latest {
		d, s := l.dev, &l.smp
		set := metric.WithAttributeSet(attribute.NewSet(attribute.String("hw.id", d.UUID), attribute.String("hw.name", d.Name),
			attribute.String("hw.vendor", "NVIDIA"), attribute.String("hw.type", "gpu")))
		fo := func(f Field, g metric.Float64ObservableGauge, v float64) {
			if s.Have&f != 0 {
				o.ObserveFloat64(g, v, set)
			}
		}
		fo(FUtil, in.util, s.Util)
		fo(FMemActivity, in.memAct, s.MemActivity)
		if s.Have&FMemUsed != 0 {
			o.ObserveInt64(in.memUsage, int64(s.MemUsed), set)
		}
		if d.MemTotal > 0 {
			o.ObserveInt64(in.memLimit, int64(d.MemTotal), set)
			fo(FMemUsed, in.memUtil, float64(s.MemUsed)/float64(d.MemTotal))
		}
		if s.Have&FSMClock != 0 {
			o.ObserveInt64(in.smClock, int64(s.SMClock), set)
		}
		if s.Have&FMemClock != 0 {
			o.ObserveInt64(in.memClock, int64(s.MemClock), set)
		}
		fo(FPower, in.power, s.PowerW)
		fo(FTemp, in.temp, s.TempC)
		fo(FSMActivity, in.smAct, s.SMActivity)
		fo(FSMOccupancy, in.smOcc, s.SMOccupancy)
		fo(FTensor, in.tensor, s.TensorActivity)
		fo(FDRAM, in.dram, s.DRAMActivity)
		if s.Have&FThrottle != 0 {
			for _, t := range throttleNames {
				v := int64(0)
				if s.Throttle&t.bit != 0 {
					v = 1
				}
				o.ObserveInt64(in.throttle, v, metric.WithAttributes(attribute.String("hw.id", d.UUID), attribute.String("specprobe.gpu.throttle_reason", t.name)))
			}
		}
		if s.Have&FEnergy != 0 {
			o.ObserveFloat64(in.energy, float64(s.EnergyMJ)/1000, set)
			prev, ok := m.prevEnergy[d.UUID]
			if !ok {
				prev, ok = l.firstMJ, l.haveFirst // the first collection covers the session so far
			}
			if ok && s.EnergyMJ >= prev {
				energyMJ += s.EnergyMJ - prev
			} else {
				haveEnergy = false
			}
			m.prevEnergy[d.UUID] = s.EnergyMJ
		} else {
			haveEnergy = false
		}
	}
	dAcc, dDraft, dVer := m.accepted-m.prevAccepted, m.drafted-m.prevDrafted, m.verifies-m.prevVerifies
	if dDraft > 0 {
		o.ObserveFloat64(in.rate, float64(dAcc)/float64(dDraft))
	}
	if dVer > 0 {
		o.ObserveFloat64(in.perVerify, float64(dAcc)/float64(dVer))
	}
	if dAcc > 0 && haveEnergy {
		o.ObserveFloat64(in.perToken, float64(energyMJ)/1000/float64(dAcc))
	}
	m.prevAccepted, m.prevDrafted, m.prevVerifies = m.accepted, m.drafted, m.verifies
}

type devSample struct {
	dev       Device
	smp       Sample
	firstMJ   uint64 // the energy counter at the GPU's first sample
	haveFirst bool
}

// latest returns the newest sample of each GPU the PID uses.
func (s *Sampler) latest() []devSample {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []devSample
	for i, u := range s.used {
		if !u {
			continue
		}
		if smp, ok := s.rings[i].latest(); ok {
			out = append(out, devSample{s.devs[i], smp, s.aggs[i].firstMJ, s.aggs[i].haveEnergy})
		}
	}
	return out
}
