package probes

import (
	"path/filepath"
	"strings"
)

// Detect returns the first spec whose match section fits the process, or nil.
func Detect(specs []*Spec, exe, cmdline string, mapped []string) *Spec {
	for _, s := range specs {
		if s.Matches(exe, cmdline, mapped) {
			return s
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
