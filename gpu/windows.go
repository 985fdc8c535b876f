package gpu

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// The energy counter moves every 100 ms, and a read only shows that it moved
// since the previous read: an update is placed within one read interval.
// Energy per step is therefore given over windows between two observed
// updates at least Options.WindowMin apart (2 s: the placement error is a
// few percent of it), for the steps that ended inside. Each window becomes a
// gpu_window span of its own, with the GPU values whose windows describe it.

// GPUWindowSpan names the spans of those windows.
const GPUWindowSpan = "gpu_window"

// Attributes of a gpu_window span.
const (
	KeyEnergy         = attribute.Key("hw.energy")                               // J over the span
	KeySteps          = attribute.Key("specprobe.gpu.window.steps")              // steps that ended in it
	KeyAccepted       = attribute.Key("specprobe.gpu.window.accepted_tokens")    // their accepted drafts
	KeyEnergyPerStep  = attribute.Key("specprobe.gpu.energy_per_step")           // J
	KeyEnergyPerToken = attribute.Key("specprobe.gpu.energy_per_accepted_token") // J per accepted token
)

// windowLag is how long a closed window waits for steps that ended in it to
// reach the span builder.
const windowLag = time.Second

const (
	maxClosed = 64      // closed windows nobody took (no tracer ticking)
	maxSteps  = 1 << 16 // steps waiting for their window
)

// windows cuts one GPU's time at the energy counter's observed updates.
type windows struct {
	lastMJ   uint64
	haveLast bool
	open     time.Time
	openMJ   uint64
	isOpen   bool
	closed   []energyWindow
}

type energyWindow struct {
	start, end time.Time
	joules     float64
}

// read takes one read of the counter.
func (w *windows) read(at time.Time, mj uint64, min time.Duration) {
	switch {
	case !w.haveLast:
		w.lastMJ, w.haveLast = mj, true
		return
	case mj == w.lastMJ:
		return
	case mj < w.lastMJ: // the counter restarted with the driver
		w.lastMJ, w.isOpen = mj, false
		return
	}
	w.lastMJ = mj
	if !w.isOpen {
		w.open, w.openMJ, w.isOpen = at, mj, true
		return
	}
	if at.Sub(w.open) < min {
		return
	}
	if len(w.closed) == maxClosed {
		w.closed = w.closed[1:]
	}
	w.closed = append(w.closed, energyWindow{w.open, at, float64(mj-w.openMJ) / 1000})
	w.open, w.openMJ = at, mj
}

// stepMark is one engine step: its end and its accepted drafts.
type stepMark struct {
	end      time.Time
	accepted int64
}

type stepKey struct {
	tid   uint32
	start time.Time
}

// ObserveStep records a request's step (from the span builder's OnStep):
// requests of one batch share the engine step (same thread and start), which
// counts once, their accepted drafts adding up. accepted < 0: none read.
func (s *Sampler) ObserveStep(pid, tid uint32, start, end time.Time, accepted int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rings == nil || (s.pid != 0 && pid != s.pid) {
		return
	}
	k := stepKey{tid, start}
	if k != s.lastStep || len(s.steps) == 0 {
		if len(s.steps) == maxSteps {
			s.steps = s.steps[1:]
		}
		s.steps = append(s.steps, stepMark{end: end})
		s.lastStep = k
	}
	if accepted > 0 {
		s.steps[len(s.steps)-1].accepted += accepted
	}
}

// Window is one gpu_window span: a GPU's time between two energy counter
// updates, with its attributes.
type Window struct {
	Start, End time.Time
	Attrs      []attribute.KeyValue
}

// TakeWindows returns the windows closed at least windowLag before now, once
// each, and forgets the steps no window will take.
func (s *Sampler) TakeWindows(now time.Time) []Window {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Window
	oldest := now
	for i := range s.windows {
		w := &s.windows[i]
		for len(w.closed) > 0 && now.Sub(w.closed[0].end) >= windowLag {
			out = append(out, s.window(i, w.closed[0]))
			w.closed = w.closed[1:]
		}
		if len(w.closed) > 0 && w.closed[0].start.Before(oldest) {
			oldest = w.closed[0].start
		}
		if w.isOpen && w.open.Before(oldest) {
			oldest = w.open
		}
	}
	j := 0
	for j < len(s.steps) && s.steps[j].end.Before(oldest) {
		j++
	}
	s.steps = s.steps[j:]
	return out
}

// window makes the attributes of one GPU's window. Call with s.mu held.
func (s *Sampler) window(dev int, e energyWindow) Window {
	span := interval{e.start, e.end}
	var steps, acc int64
	for _, st := range s.steps {
		if st.end.After(e.start) && !st.end.After(e.end) {
			steps++
			acc += st.accepted
		}
	}
	attrs := []attribute.KeyValue{attribute.String("hw.id", s.devs[dev].UUID), KeyEnergy.Float64(e.joules),
		KeySteps.Int64(steps), KeyAccepted.Int64(acc)}
	if steps > 0 {
		attrs = append(attrs, KeyEnergyPerStep.Float64(e.joules/float64(steps)))
	}
	if acc > 0 {
		attrs = append(attrs, KeyEnergyPerToken.Float64(e.joules/float64(acc)))
	}
	if w, ok := s.rings[dev].over(span, 0); ok {
		w.dev = s.devs[dev]
		attrs = append(attrs, w.attrs()[1:]...) // hw.id is there already
	}
	return Window{Start: e.start, End: e.end, Attrs: attrs}
}
