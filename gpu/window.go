package gpu

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// A stage lasts 1–30 ms; NVML's values average over 100 ms to 1 s. A span
// gets only the values whose window describes it (rule.go), with the window
// they cover; on a short stage that is none, and the values go on gpu_window
// spans (windows.go) and Perfetto's counter tracks instead.

// Window attributes: the union of the windows of the values on a span.
const (
	KeyWindowStart    = attribute.Key("specprobe.gpu.window.start")    // int, Unix ns
	KeyWindowDuration = attribute.Key("specprobe.gpu.window.duration") // double, seconds
)

type stageCache struct {
	pid        uint32
	start, end time.Time
	attrs      []attribute.KeyValue
}

// spanFields are the fields a span may carry, in attribute order.
var spanFields = []Field{FUtil, FMemActivity, FMemUsed, FSMClock, FMemClock, FPower, FThrottle,
	FSMActivity, FSMOccupancy, FTensor, FDRAM}

// gpuWindow is what one GPU's samples say about one span.
type gpuWindow struct {
	dev    Device
	have   Field
	val    [len(fieldNames)]float64 // by field bit: the mean of the samples that describe the span
	thr    uint64                   // throttle reasons seen
	window interval                 // the union of the windows of the values kept
}

var fieldNames = [...]string{"util", "memact", "memused", "smclock", "memclock", "power", "energy", "temp",
	"throttle", "sm", "occupancy", "tensor", "dram"}

func bit(f Field) int {
	for i := range fieldNames {
		if f == 1<<i {
			return i
		}
	}
	return -1
}

// StageAttrs returns the GPU values of pid whose windows describe the stage
// [start, end], for spanbuilder.OTelSink.StageAttrs; nil where none does.
// One GPU gives scalar attributes; several give arrays in device order (only
// the fields all of them have).
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
	if c := &s.cache; c.pid == pid && c.start.Equal(start) && c.end.Equal(end) {
		return c.attrs
	}
	out := s.attrsOver(interval{start, end}, end.Sub(start)/2)
	s.cache = stageCache{pid: pid, start: start, end: end, attrs: out}
	return out
}

// attrsOver gives the attributes of the span [span] from the samples taken
// during it or up to reach after it. Call with s.mu held.
func (s *Sampler) attrsOver(span interval, reach time.Duration) []attribute.KeyValue {
	var ws []gpuWindow
	for i, u := range s.used {
		if !u {
			continue
		}
		if w, ok := s.rings[i].over(span, reach); ok {
			w.dev = s.devs[i]
			ws = append(ws, w)
		}
	}
	switch len(ws) {
	case 0:
		return nil
	case 1:
		return ws[0].attrs()
	}
	return merge(ws)
}

// over averages, field by field, the samples taken in (start, end+reach]
// whose window of that field describes the span.
func (r *ring) over(span interval, reach time.Duration) (gpuWindow, bool) {
	var w gpuWindow
	var n [len(fieldNames)]int
	var last [len(fieldNames)]interval // carried values repeat: count each read once
	for i := r.search(span.start); i < r.n; i++ {
		smp := r.at(i)
		if smp.At.After(span.end.Add(reach)) {
			break
		}
		var prevAt time.Time
		if i > 0 {
			prevAt = r.at(i - 1).At
		}
		for _, f := range spanFields {
			b := bit(f)
			fw := fieldWindow(f, smp, prevAt)
			if smp.Have&f == 0 || !describes(fw, span) || fw == last[b] {
				continue
			}
			last[b] = fw
			n[b]++
			w.have |= f
			w.window = w.window.union(fw)
			if f == FThrottle {
				w.thr |= smp.Throttle
				continue
			}
			w.val[b] += value(f, smp)
		}
	}
	for b := range n {
		if n[b] > 0 {
			w.val[b] /= float64(n[b])
		}
	}
	return w, w.have != 0
}

func value(f Field, s *Sample) float64 {
	switch f {
	case FUtil:
		return s.Util
	case FMemActivity:
		return s.MemActivity
	case FMemUsed:
		return float64(s.MemUsed)
	case FSMClock:
		return float64(s.SMClock)
	case FMemClock:
		return float64(s.MemClock)
	case FPower:
		return s.PowerW
	case FSMActivity:
		return s.SMActivity
	case FSMOccupancy:
		return s.SMOccupancy
	case FTensor:
		return s.TensorActivity
	case FDRAM:
		return s.DRAMActivity
	}
	return 0
}

func (w *gpuWindow) attrs() []attribute.KeyValue {
	out := []attribute.KeyValue{attribute.String("hw.id", w.dev.UUID),
		KeyWindowStart.Int64(w.window.start.UnixNano()), KeyWindowDuration.Float64(w.window.dur().Seconds())}
	v := func(f Field) float64 { return w.val[bit(f)] }
	f := func(field Field, kv attribute.KeyValue) {
		if w.have&field != 0 {
			out = append(out, kv)
		}
	}
	f(FUtil, attribute.Float64("hw.gpu.utilization", v(FUtil)))
	f(FMemActivity, attribute.Float64("specprobe.gpu.memory.activity", v(FMemActivity)))
	f(FMemUsed, attribute.Int64("hw.gpu.memory.usage", int64(v(FMemUsed))))
	if w.dev.MemTotal > 0 {
		f(FMemUsed, attribute.Int64("hw.gpu.memory.limit", int64(w.dev.MemTotal)))
		f(FMemUsed, attribute.Float64("hw.gpu.memory.utilization", v(FMemUsed)/float64(w.dev.MemTotal)))
	}
	f(FSMClock, attribute.Int64("specprobe.gpu.clock.sm", int64(v(FSMClock))))
	f(FMemClock, attribute.Int64("specprobe.gpu.clock.memory", int64(v(FMemClock))))
	f(FPower, attribute.Float64("hw.power", v(FPower)))
	f(FThrottle, attribute.String("specprobe.gpu.throttle_reasons", ThrottleReasons(w.thr)))
	f(FSMActivity, attribute.Float64("specprobe.gpu.sm_activity", v(FSMActivity)))
	f(FSMOccupancy, attribute.Float64("specprobe.gpu.sm_occupancy", v(FSMOccupancy)))
	f(FTensor, attribute.Float64("specprobe.gpu.tensor_activity", v(FTensor)))
	f(FDRAM, attribute.Float64("specprobe.gpu.dram_activity", v(FDRAM)))
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
