package export

// Counter is one reading of a counter track: GPU power, utilisation, clocks.
type Counter struct {
	Pid   int64 // the process the track is drawn under
	Track string
	Unit  string
	At    int64 // Unix ns
	Value float64
}

// CounterSink is an exporter that draws counter tracks (Perfetto's JSON).
type CounterSink interface {
	AddCounters([]Counter)
}

// AddCounters keeps counter readings for the trace written at Shutdown.
func (p *perfetto) AddCounters(cs []Counter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.counters = append(p.counters, cs...)
	}
}

// counterEvents are "C" events: a viewer draws one track per name under the
// process, the value holding until the next reading.
func (p *perfetto) counterEvents() []traceEvent {
	evs := make([]traceEvent, 0, len(p.counters))
	for _, c := range p.counters {
		evs = append(evs, traceEvent{Name: c.Track, Cat: "gpu", Ph: "C", Ts: micros(c.At), Pid: c.Pid,
			Args: map[string]any{c.Unit: c.Value}})
	}
	return evs
}
