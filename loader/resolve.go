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
	// Layout, for a spec whose derefs name fields: their offsets in this
	// process and where each came from (Stage's derefs are set from it).
	Layout *Layout
}

// Resolve finds every stage of spec in the files pid maps.
func Resolve(pid int, spec *probes.Spec, skipEndbr bool) ([]Target, error) {
	checks, err := CheckNative(pid, spec, skipEndbr)
	if err != nil {
		return nil, err
	}
	var out []Target
	for _, c := range checks {
		if c.Err != nil {
			return nil, c.Err
		}
		out = append(out, *c.Target)
	}
	return out, nil
}

// NativeCheck is what a dry run found for one native stage: its target, or
// why it was not found.
type NativeCheck struct {
	Stage  *probes.Stage
	Target *Target
	Err    error
}

// CheckNative resolves every native stage of spec as Resolve does, each on
// its own: one stage's failure does not hide the next's.
func CheckNative(pid int, spec *probes.Spec, skipEndbr bool) ([]NativeCheck, error) {
	if err := CheckPID(pid); err != nil {
		return nil, err
	}
	maps, err := Mappings(pid)
	if err != nil {
		return nil, err
	}
	layout, err := ResolveFields(maps, spec)
	if err != nil {
		return nil, err
	}
	var out []NativeCheck
	for _, name := range probes.ProbedStages {
		st := spec.Stages[name]
		if st == nil || st.IsPython() {
			continue
		}
		st, err := ResolvedStage(st, layout)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", spec.File, err)
		}
		t, err := resolveStage(pid, maps, st, skipEndbr)
		if t != nil {
			t.Layout = layout
		}
		if err != nil {
			err = fmt.Errorf("%s: stage %s: %w", spec.File, name, err)
		}
		out = append(out, NativeCheck{Stage: st, Target: t, Err: err})
	}
	return out, nil
}

func resolveStage(pid int, maps []Mapping, st *probes.Stage, skipEndbr bool) (*Target, error) {
	var searched []string
	var near []string
	for _, want := range st.Binary {
		for _, m := range maps {
			if !MatchBinary(m.Path, want) {
				continue
			}
			t, err := resolveIn(m, st, skipEndbr, &near)
			if err != nil || t != nil {
				return t, err
			}
			searched = append(searched, m.Path)
		}
	}
	if len(searched) == 0 {
		var mapped []string
		for _, m := range maps {
			mapped = append(mapped, m.Path)
		}
		if len(mapped) == 0 {
			return nil, fmt.Errorf("PID %d maps none of %s; it maps no executable file at all", pid, strings.Join(st.Binary, ", "))
		}
		return nil, fmt.Errorf("PID %d maps none of %s; it maps:\n  %s",
			pid, strings.Join(st.Binary, ", "), strings.Join(mapped, "\n  "))
	}
	msg := fmt.Sprintf("symbol %q not found (searched .symtab and .dynsym of %s)", st.Symbol, strings.Join(searched, ", "))
	if len(near) > 0 {
		msg += "; close names: " + strings.Join(near, ", ")
	}
	return nil, fmt.Errorf("%s", msg)
}

// resolveIn looks for the stage's symbol in one mapped file; nil when it is
// not there, with close names added to near.
func resolveIn(m Mapping, st *probes.Stage, skipEndbr bool, near *[]string) (*Target, error) {
	f, err := m.openELF()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sym, err := findSymbol(f, st.Symbol)
	if err != nil {
		return nil, err
	}
	if sym == nil {
		*near = append(*near, nearNames(f, st.Symbol, 5)...)
		return nil, nil
	}
	off, first, err := probeOffset(f, sym, skipEndbr)
	if err != nil {
		return nil, err
	}
	return &Target{Stage: st, File: m, Symbol: sym, Offset: off, First: first}, nil
}
