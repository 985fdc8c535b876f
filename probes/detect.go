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
}

// Detect returns the spec whose match section fits the process, or nil; of
// several, the one with the highest match priority, then the first.
func Detect(specs []*Spec, p Process) *Spec {
	for _, s := range ByPriority(specs) {
		if s.Matches(p.Exe, p.Cmdline, p.Mapped) {
			return s
		}
		if p.HasModule != nil {
			for _, m := range s.Match.Module {
				if p.HasModule(m) {
					return s
				}
			}
		}
	}
	return nil
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
