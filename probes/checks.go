package probes

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ValueCheck is what a value a native stage reads must satisfy for the
// offsets it was read through to be believed: a wrong offset reads another
// field, and the id it makes is wrong without a sign. The tracer checks
// every call and stops at the first that fails, before its event is used.
type ValueCheck struct {
	Min *int64
	// Below bounds the value by a count the process was started with
	// (llama-server's slots: -np N).
	Below *ProcessCount
	// IncreasingPer names another value of the same call (the slot): per
	// value of it, this one (the request id) never decreases, and one id
	// is never seen under two of them.
	IncreasingPer string
	Line          int
}

// ProcessCount is a number given on the process's command line (the first
// of Flags, as "-np 4" or "--parallel=4") or in its environment (Env); where
// neither gives a positive number, Default.
type ProcessCount struct {
	Flags   []string
	Env     string
	Default int64
}

// Count is the number the process was started with, and where it was read:
// the command line's last flag wins over the environment, as in
// llama.cpp's argument parser.
func (c *ProcessCount) Count(cmdline, environ []string) (int64, string) {
	val, label := "", ""
	for i, a := range cmdline {
		for _, f := range c.Flags {
			switch {
			case a == f && i+1 < len(cmdline):
				val, label = cmdline[i+1], a+" "+cmdline[i+1]
			case strings.HasPrefix(a, f+"="):
				val, label = a[len(f)+1:], a
			}
		}
	}
	if label == "" && c.Env != "" {
		for _, e := range environ {
			if v, ok := strings.CutPrefix(e, c.Env+"="); ok {
				val, label = v, e
			}
		}
	}
	if label == "" {
		return c.Default, fmt.Sprintf("the default %d (no %s given)", c.Default, strings.Join(append(append([]string{}, c.Flags...), c.Env), " or "))
	}
	if n, err := strconv.ParseInt(val, 10, 64); err == nil && n > 0 {
		return n, label
	}
	return c.Default, fmt.Sprintf("%s: the default %d", label, c.Default)
}

func (p *parser) valueCheck(n *yaml.Node, what string) *ValueCheck {
	f := p.fields(n, what, "min", "below", "increasing_per")
	c := &ValueCheck{Line: n.Line}
	if v, ok := f["min"]; ok {
		x := p.int(v, what+".min")
		c.Min = &x
	}
	if v, ok := f["below"]; ok {
		bf := p.fields(v, what+".below", "flag", "env", "default")
		c.Below = &ProcessCount{}
		if fl, ok := bf["flag"]; ok {
			c.Below.Flags = p.strs(fl, what+".below.flag")
		}
		if e, ok := bf["env"]; ok {
			c.Below.Env = p.str(e, what+".below.env")
		}
		if d, ok := bf["default"]; ok {
			c.Below.Default = p.int(d, what+".below.default")
		}
		if c.Below.Default < 1 {
			p.fail(v, "%s.below: expected default, a positive count (used when the process gives none)", what)
		}
	}
	if v, ok := f["increasing_per"]; ok {
		c.IncreasingPer = p.str(v, what+".increasing_per")
	}
	if c.Min == nil && c.Below == nil && c.IncreasingPer == "" {
		p.fail(n, "%s: expected min, below or increasing_per", what)
	}
	return c
}

// checkValueChecks: increasing_per names a value of the same boundary, and
// only a request id increases.
func (p *parser) checkValueChecks(s *Spec) {
	for _, name := range StageNames {
		st := s.Stages[name]
		if st == nil || p.err != nil {
			continue
		}
		for _, nv := range append(st.Boundaries()[0], st.Boundaries()[1]...) {
			c := nv.Value.Check
			if c == nil || c.IncreasingPer == "" {
				continue
			}
			if nv.Name != "" {
				p.failAt(c.Line, "stages.%s.values.%s.check: increasing_per is for the request_id", name, nv.Name)
				continue
			}
			other := st.Values[c.IncreasingPer]
			if other == nil || other.At != nv.Value.At || other.Type != TypeInt {
				p.failAt(c.Line, "stages.%s.request_id.check.increasing_per: %q is not an int value read at %s", name, c.IncreasingPer, nv.Value.At)
			}
		}
	}
}
