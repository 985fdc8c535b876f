package gpu

import (
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// A stage lasts 1–30ms and GPU samples come every 100ms, averaged by the
// driver over up to a second: a span gets the window of samples around it,
// not a measurement of itself. Energy is the exception, as a counter delta
// can be shared out over the window.

type stageCache struct {
	pid        uint32
	start, end time.Time
	attrs      []attribute.KeyValue
}

// gpuWindow is what one GPU's samples say about one stage.
type gpuWindow struct {
	dev      Device
	latest   Sample // the first sample at or after the end, else the last before it
	throttle uint64 // any reason seen in the window
	haveThr  bool
	// energy counter delta between the counter updates around the stage
	energyJ, windowJ, windowS float64
	haveEnergy                bool
}

// StageAttrs returns the GPU state that overlapped [start, end] of a stage of
// pid, for spanbuilder.OTelSink.StageAttrs. One GPU gives scalar attributes;
// several give arrays in device order (only the fields all of them have).
func (s *Sampler) StageAttrs(pid uint32, start, end time.Time) []attribute.KeyValue {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rings == nil || (pid != 0 && pid != s.pid) {
		return nil
	}
	// A batched call reaches us once per request it served, same interval.
	if c := &s.cache; c.attrs != nil && c.pid == pid && c.start.Equal(start) && c.end.Equal(end) {
		return c.attrs
	}
	stale := 3 * s.opts.Interval
	var ws []gpuWindow
	for i, u := range s.used {
		if !u {
			continue
		}
		if w, ok := s.rings[i].window(start, end, stale); ok {
			w.dev = s.devs[i]
			ws = append(ws, w)
		}
	}
	var out []attribute.KeyValue
	switch len(ws) {
	case 0:
	case 1:
		out = ws[0].attrs()
	default:
		out = merge(ws)
	}
	s.cache = stageCache{pid: pid, start: start, end: end, attrs: out}
	return out
}

func (r *ring) window(start, end time.Time, stale time.Duration) (gpuWindow, bool) {
	var w gpuWindow
	if r.n == 0 {
		return w, false
	}
	lo := r.search(start) - 1                                                   // last sample at or before start, -1 if none
	hi := sort.Search(r.n, func(i int) bool { return !r.at(i).At.Before(end) }) // first at or after end
	switch {
	case hi < r.n && r.at(hi).At.Sub(end) <= stale:
		w.latest = *r.at(hi)
	case hi > 0 && end.Sub(r.at(hi-1).At) <= stale:
		w.latest = *r.at(hi - 1)
		hi--
	default:
		return w, false // sampling stopped or fell behind: nothing honest to say
	}
	for i := max(lo, 0); i <= hi; i++ {
		if smp := r.at(i); smp.Have&FThrottle != 0 {
			w.throttle |= smp.Throttle
			w.haveThr = true
		}
	}
	w.energy(r, start, end, stale)
	return w, true
}

// energy brackets the stage between the counter updates just before and
// just after it (a sample showing a new value marks an update) and gives the
// stage its time share of that delta. Where the counter updates more coarsely
// than a few sample intervals, or the update after the stage is not in yet,
// there is no energy and the span carries power only.
func (w *gpuWindow) energy(r *ring, start, end time.Time, stale time.Duration) {
	changed := func(i int) bool {
		a, b := r.at(i-1), r.at(i)
		return a.Have&b.Have&FEnergy != 0 && a.EnergyMJ != b.EnergyMJ
	}
	a := -1
	for i := r.search(start) - 1; i >= 1; i-- {
		if start.Sub(r.at(i).At) > stale {
			break
		}
		if changed(i) {
			a = i
			break
		}
	}
	if a < 0 {
		return
	}
	b := -1
	for i := sort.Search(r.n, func(i int) bool { return !r.at(i).At.Before(end) }); i >= 1 && i < r.n; i++ {
		if r.at(i).At.Sub(end) > stale {
			break
		}
		if changed(i) {
			b = i
			break
		}
	}
	if b < 0 {
		return
	}
	sa, sb := r.at(a), r.at(b)
	if sb.EnergyMJ < sa.EnergyMJ {
		return // the counter restarted with the driver
	}
	dt := sb.At.Sub(sa.At).Seconds()
	w.windowJ = float64(sb.EnergyMJ-sa.EnergyMJ) / 1000
	w.windowS = dt
	w.energyJ = w.windowJ * end.Sub(start).Seconds() / dt
	w.haveEnergy = true
}

func (w *gpuWindow) attrs() []attribute.KeyValue {
	s := &w.latest
	out := []attribute.KeyValue{attribute.String("hw.id", w.dev.UUID)}
	f := func(field Field, kv attribute.KeyValue) {
		if s.Have&field != 0 {
			out = append(out, kv)
		}
	}
	f(FUtil, attribute.Float64("hw.gpu.utilization", s.Util))
	f(FMemActivity, attribute.Float64("specprobe.gpu.memory.activity", s.MemActivity))
	f(FMemUsed, attribute.Int64("hw.gpu.memory.usage", int64(s.MemUsed)))
	if w.dev.MemTotal > 0 {
		out = append(out, attribute.Int64("hw.gpu.memory.limit", int64(w.dev.MemTotal)))
		f(FMemUsed, attribute.Float64("hw.gpu.memory.utilization", float64(s.MemUsed)/float64(w.dev.MemTotal)))
	}
	f(FSMClock, attribute.Int64("specprobe.gpu.clock.sm", int64(s.SMClock)))
	f(FMemClock, attribute.Int64("specprobe.gpu.clock.memory", int64(s.MemClock)))
	f(FPower, attribute.Float64("hw.power", s.PowerW))
	f(FTemp, attribute.Float64("hw.temperature", s.TempC))
	if w.haveThr {
		out = append(out, attribute.String("specprobe.gpu.throttle_reasons", ThrottleReasons(w.throttle)))
	}
	if w.haveEnergy {
		out = append(out, attribute.Float64("hw.energy", w.energyJ),
			attribute.Float64("specprobe.gpu.energy.window", w.windowJ),
			attribute.Float64("specprobe.gpu.energy.window_duration", w.windowS))
	}
	f(FSMActivity, attribute.Float64("specprobe.gpu.sm_activity", s.SMActivity))
	f(FSMOccupancy, attribute.Float64("specprobe.gpu.sm_occupancy", s.SMOccupancy))
	f(FTensor, attribute.Float64("specprobe.gpu.tensor_activity", s.TensorActivity))
	f(FDRAM, attribute.Float64("specprobe.gpu.dram_activity", s.DRAMActivity))
	return out
}

// merge turns several GPUs' attributes into arrays, index i for the i-th GPU.
func merge(ws []gpuWindow) []attribute.KeyValue {
	per := make([]map[attribute.Key]attribute.Value, len(ws))
	var order []attribute.KeyValue
	for i := range ws {
		kvs := ws[i].attrs()
		if i == 0 {
			order = kvs
		}
		per[i] = make(map[attribute.Key]attribute.Value, len(kvs))
		for _, kv := range kvs {
			per[i][kv.Key] = kv.Value
		}
	}
	var out []attribute.KeyValue
next:
	for _, kv := range order {
		var strs []string
		var ints []int64
		var floats []float64
		for _, m := range per {
			v, ok := m[kv.Key]
			if !ok {
				continue next
			}
			switch v.Type() {
			case attribute.STRING:
				strs = append(strs, v.AsString())
			case attribute.INT64:
				ints = append(ints, v.AsInt64())
			case attribute.FLOAT64:
				floats = append(floats, v.AsFloat64())
			}
		}
		switch kv.Value.Type() {
		case attribute.STRING:
			out = append(out, attribute.StringSlice(string(kv.Key), strs))
		case attribute.INT64:
			out = append(out, attribute.Int64Slice(string(kv.Key), ints))
		case attribute.FLOAT64:
			out = append(out, attribute.Float64Slice(string(kv.Key), floats))
		}
	}
	return out
}
