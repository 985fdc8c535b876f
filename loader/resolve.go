package loader

import (
	"fmt"
	"strings"

	"github.com/specprobe/specprobe/probes"
)

// Target is one stage function found in the process.
type Target struct {
	Stage  *probes.Stage
	File   Mapping
	Symbol *Symbol
	Offset uint64 // where the probe goes (after endbr64 when skipped)
	First  string // the probed instruction, for `attach -v` and doctor
}

// Resolve finds every stage of spec in the files pid maps.
func Resolve(pid int, spec *probes.Spec, skipEndbr bool) ([]Target, error) {
	if err := CheckPID(pid); err != nil {
		return nil, err
	}
	maps, err := Mappings(pid)
	if err != nil {
		return nil, err
	}
	var out []Target
	for _, name := range probes.StageNames {
		st := spec.Stages[name]
		if st == nil || st.IsPython() {
			continue
		}
		t, err := resolveStage(pid, maps, st, skipEndbr)
		if err != nil {
			return nil, fmt.Errorf("%s: stage %s: %w", spec.File, name, err)
		}
		out = append(out, *t)
	}
	return out, nil
}

func resolveStage(pid int, maps []Mapping, st *probes.Stage, skipEndbr bool) (*Target, error) {
	var searched []string
	for _, want := range st.Binary {
		for _, m := range maps {
			if !MatchBinary(m.Path, want) {
				continue
			}
			sym, err := FindSymbol(m.Open, st.Symbol)
			if err != nil {
				return nil, err
			}
			searched = append(searched, m.Path)
			if sym == nil {
				continue
			}
			off, first, err := ProbeOffset(m.Open, sym, skipEndbr)
			if err != nil {
				return nil, err
			}
			return &Target{Stage: st, File: m, Symbol: sym, Offset: off, First: first}, nil
		}
	}
	if len(searched) == 0 {
		var mapped []string
		for _, m := range maps {
			mapped = append(mapped, m.Path)
		}
		return nil, fmt.Errorf("PID %d maps none of %s; it maps:\n  %s",
			pid, strings.Join(st.Binary, ", "), strings.Join(mapped, "\n  "))
	}
	msg := fmt.Sprintf("symbol %q not found (searched .symtab and .dynsym of %s)", st.Symbol, strings.Join(searched, ", "))
	var near []string
	for _, m := range maps {
		for _, s := range searched {
			if m.Path == s {
				near = append(near, NearNames(m.Open, st.Symbol, 5)...)
			}
		}
	}
	if len(near) > 0 {
		msg += "; close names: " + strings.Join(near, ", ")
	}
	return nil, fmt.Errorf("%s", msg)
}
