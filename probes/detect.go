package probes

import (
	"path/filepath"
	"slices"
	"strings"
)

// Process is what detection knows of a process.
type Process struct {
	Exe, Cmdline string
	Mapped       []string
	// HasModule tells whether a Python module is imported; nil for a
	// process that is not CPython.
	HasModule func(string) bool
	// RequireModule: a spec that names modules (EngineModules) matches
	// only once the process has imported one of them, never by
	// executable or command line. An engine's launcher shares the server's
	// command line but runs no stage: the daemon, which attaches to every
	// process it finds, sets it; attach, told the PID, does not.
	RequireModule bool
	// Title is the process's title (its first argument, where setproctitle
	// writes it), from which a spec's match.ranks reads its ranks.
	Title string
	// AnyRank traces a process whatever rank it is (attach --any-rank).
	AnyRank bool
}

// Detect returns the spec whose match section fits the process, or nil; of
// several, the one with the highest match priority, then the first. It is
// the one place a spec is chosen for a process, by attach and the daemon.
// A process that fits a spec but is not the rank it traces (match.ranks)
// gets no spec and an *OtherRankError naming both.
func Detect(specs []*Spec, p Process) (*Spec, error) {
	return DetectServer(specs, p, nil)
}

func detect(specs []*Spec, p Process) *Spec {
	for _, s := range ByPriority(specs) {
		mods := s.EngineModules()
		if !(p.RequireModule && len(mods) > 0) && s.Matches(p.Exe, p.Cmdline, p.Mapped) {
			return s
		}
		if p.HasModule != nil {
			for _, m := range mods {
				if p.HasModule(m) {
					return s
				}
			}
		}
	}
	return nil
}

// IsPython tells whether the spec has a Python stage.
func (s *Spec) IsPython() bool {
	for _, st := range s.Stages {
		if st.IsPython() {
			return true
		}
	}
	return false
}

// EngineModules are the modules whose import says the engine runs in a
// process: match.module, else the modules of the stages.
func (s *Spec) EngineModules() []string {
	if len(s.Match.Module) > 0 {
		return s.Match.Module
	}
	var out []string
	for _, name := range StageNames {
		if st := s.Stages[name]; st != nil && st.IsPython() && !slices.Contains(out, st.Module) {
			out = append(out, st.Module)
		}
	}
	return out
}

// Matches tells whether a process fits the spec's match section.
func (s *Spec) Matches(exe, cmdline string, mapped []string) bool {
	for _, e := range s.Match.Exe {
		if e == exe {
			return true
		}
	}
	for _, c := range s.Match.Cmdline {
		if c != "" && strings.Contains(cmdline, c) {
			return true
		}
	}
	for _, lib := range s.Match.Library {
		if lib == "" {
			continue
		}
		for _, m := range mapped {
			base := filepath.Base(m)
			if base == lib || strings.HasPrefix(base, lib+".") {
				return true
			}
		}
	}
	return false
}

// ByPriority returns specs in detection order: highest match priority first,
// in their given order otherwise.
func ByPriority(specs []*Spec) []*Spec {
	out := slices.Clone(specs)
	slices.SortStableFunc(out, func(a, b *Spec) int { return b.Match.Priority - a.Match.Priority })
	return out
}

// DetectServer is Detect for a process that may be one of several of a
// server (procgroup): besides its own match, a spec that places its stages
// by process title (Stage.Process) may be matched by another process of
// the server (vLLM with TP > 1: the speculator's module is imported in the
// workers, not in EngineCore). Of the matches, the highest priority wins,
// the attached process's first among equals; its ranks are checked
// (CheckRank).
func DetectServer(specs []*Spec, attached Process, others []Process) (*Spec, error) {
	best := detect(specs, attached)
	for _, p := range others {
		s := detect(specs, p)
		if s != nil && s.Placed() && (best == nil || s.Match.Priority > best.Match.Priority) {
			best = s
		}
	}
	if best == nil || attached.AnyRank {
		return best, nil
	}
	if err := best.CheckRank(attached.Title); err != nil {
		return nil, err
	}
	return best, nil
}

// Placed tells whether a stage of the spec names the processes it runs in.
func (s *Spec) Placed() bool {
	for _, st := range s.Stages {
		if len(st.Process) > 0 {
			return true
		}
	}
	return false
}
