package spanbuilder

import (
	"slices"
	"time"

	"github.com/specprobe/specprobe/spanschema"
)

// Stats are the running numbers the live summary shows.
type Stats struct {
	Events            uint64
	Steps             uint64 // decode steps of every thread, whether their calls named a request or not
	UnattributedSteps uint64 // of those, the steps whose calls named no request (no spans)
	UnmatchedExits    uint64
	UnattributedCalls uint64 // calls in a step that named no request
	Withdrawn         uint64 // entries that turned out not to be calls
	// Calls closed without their exit (cut.go): proved over by what the
	// thread did next or by their age, and cut because the kernel lost
	// events of their thread.
	CutExitMissed, CutDropped uint64
	// DroppedByThread counts, per thread, the events the kernel lost.
	DroppedByThread map[uint32]uint64
	Calls           map[string]uint64
	Errors          uint64
	Accepted        int64 // sum of num_correct_drafts
	Verifies        uint64
	// CUDA sums what threads did in the CUDA driver, by stage, and outside
	// the stages of their steps (under OutsideStages); empty without CUDA
	// probes.
	CUDA    map[string]CUDAUse
	drafted map[string]int64 // sum of num_drafts, by stage
	latency map[string]*window
}

// Drafted is the count of drafts the acceptance is over. A spec may read
// num_drafts at more than one stage (the drafts proposed at draft, the
// drafts checked at verify or accept); they count the same drafts, so one
// side is taken: the verify side where the spec reads it there, since those
// are the drafts whose acceptance num_correct_drafts counts, else the draft side.
func (s *Stats) Drafted() int64 {
	if n, ok := s.drafted[spanschema.Verify]; ok {
		return n + s.drafted[spanschema.Accept]
	}
	if n, ok := s.drafted[spanschema.Accept]; ok {
		return n
	}
	return s.drafted[spanschema.Draft] + s.drafted[spanschema.DraftExtend]
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
		s.drafted = map[string]int64{}
	}
	s.Calls[c.Stage]++
	s.addCUDA(c.Stage, c.CUDA)
	if c.Err != "" {
		s.Errors++
	}
	switch c.Cut {
	case CutExitMissed:
		s.CutExitMissed++
	case CutDropped:
		s.CutDropped++
	}
	for _, v := range c.Values {
		switch v.Name {
		case spanschema.ValueDrafts:
			s.drafted[c.Stage] += v.V
		case spanschema.ValueCorrect:
			s.Accepted += v.V
		}
	}
	if c.Stage == spanschema.Verify {
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

// OutsideStages is Stats.CUDA's key for what a step did outside its stages.
const OutsideStages = "outside stages"

func (s *Stats) addCUDA(key string, u CUDAUse) {
	if !u.Known {
		return
	}
	if s.CUDA == nil {
		s.CUDA = map[string]CUDAUse{}
	}
	sum, ok := s.CUDA[key]
	if !ok {
		sum.Known = true
	}
	s.CUDA[key] = sum.add(u)
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
