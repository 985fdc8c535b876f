package spanbuilder

import (
	"slices"
	"time"
)

// Stats are the running numbers the live summary shows.
type Stats struct {
	Events            uint64
	Steps             uint64 // steps of a thread that served at least one request
	UnmatchedExits    uint64
	UnattributedCalls uint64 // calls in a step that named no request
	Withdrawn         uint64 // entries that turned out not to be calls
	Calls             map[string]uint64
	Errors            uint64
	Drafted           int64 // sum of num_drafts
	Accepted          int64 // sum of num_correct_drafts
	Verifies          uint64
	latency           map[string]*window
}

// window keeps the latest durations of a stage for percentiles.
type window struct {
	d    []time.Duration
	next int
}

const windowSize = 4096

func (s *Stats) observe(c *Call) {
	if s.Calls == nil {
		s.Calls = map[string]uint64{}
		s.latency = map[string]*window{}
	}
	s.Calls[c.Stage]++
	if c.Err != "" {
		s.Errors++
	}
	for _, v := range c.Values {
		switch v.Name {
		case "num_drafts":
			s.Drafted += v.V
		case "num_correct_drafts":
			s.Accepted += v.V
		}
	}
	if c.Stage == "verify" {
		s.Verifies++
	}
	w := s.latency[c.Stage]
	if w == nil {
		w = &window{}
		s.latency[c.Stage] = w
	}
	d := c.End.Sub(c.Start)
	if len(w.d) < windowSize {
		w.d = append(w.d, d)
	} else {
		w.d[w.next] = d
		w.next = (w.next + 1) % windowSize
	}
}

// Percentile returns the p-th percentile (0..100) of a stage's recent durations.
func (s *Stats) Percentile(stage string, p float64) (time.Duration, bool) {
	w := s.latency[stage]
	if w == nil || len(w.d) == 0 {
		return 0, false
	}
	d := slices.Clone(w.d)
	slices.Sort(d)
	i := int(p / 100 * float64(len(d)-1))
	return d[i], true
}
