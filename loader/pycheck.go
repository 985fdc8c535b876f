package loader

import (
	"fmt"
	"strings"

	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
)

// A dry run of a spec against a live Python process (specprobe probes check
// --pid): every stage found and compiled as attach would, nothing armed, and
// the values of a call read once where a thread is inside one now.

// PyCheck is what a dry run found for one Python stage.
type PyCheck struct {
	Stage *probes.Stage // as the spec gives it
	// Target is the stage found: its code object, and the stage with its
	// arguments resolved (Target.Stage) and its reads compiled.
	Target PyTarget
	Err    error
	NotYet bool // Err is a module or function not there yet
	// Live is a call running now, read once; nil when no thread was inside
	// the function (or, for a read_from stage, inside its caller).
	Live *PyLive
}

// PyLive is one running call's values.
type PyLive struct {
	TID    int
	Func   string // the function whose frame was read
	Values []PyLiveValue
}

// PyLiveValue is one of a stage's reads, read from a running frame.
type PyLiveValue struct {
	What  string // requests, when, accepted, drafted
	Path  string // batch.reqs[*].rid
	Value pyproc.Value
	Err   error
}

// CheckPython finds and compiles every Python stage of spec in proc, and
// reads each stage's values once from a thread running it now.
func CheckPython(proc *pyproc.Process, spec *probes.Spec) []PyCheck {
	var out []PyCheck
	for _, name := range probes.ProbedStages {
		st := spec.Stages[name]
		if st == nil || !st.IsPython() {
			continue
		}
		c := PyCheck{Stage: st}
		t, notYet, err := findPyTarget(proc, st)
		c.Target, c.NotYet = t, notYet
		if err != nil {
			c.Err = stageError(spec, st, err)
		} else {
			c.Live = liveCall(proc, t)
		}
		out = append(out, c)
	}
	return out
}

// liveCall reads t's values from the first thread found inside its
// function (its read_from's, where it has one). The thread keeps running
// while it is read: what this shows is a sample, not what a trap reads.
func liveCall(proc *pyproc.Process, t PyTarget) *PyLive {
	code, fn := t.Code, t.Stage.Qualname
	if t.ReadFrom != nil {
		code, fn = t.ReadFrom, t.Stage.ReadFrom
	}
	threads, err := proc.Threads()
	if err != nil {
		return nil
	}
	for _, th := range threads {
		if th.TID <= 0 {
			continue
		}
		frame, err := proc.FindFrame(th.TID, code.Addr)
		if err != nil {
			continue
		}
		live := &PyLive{TID: th.TID, Func: fn}
		for _, r := range stageReads(t.Stage) {
			v := PyLiveValue{What: r.what, Path: joinPath(r.arg, r.path, "")}
			obj, err := proc.Local(frame, r.arg)
			if err == nil {
				v.Value, err = proc.Eval(obj, r.path)
			}
			v.Err = err
			live.Values = append(live.Values, v)
		}
		return live
	}
	return nil
}

type stageRead struct{ what, arg, path string }

// stageReads are the reads of a resolved stage that come from a frame (the
// return value is not there while the call runs).
func stageReads(st *probes.Stage) []stageRead {
	var out []stageRead
	add := func(what, arg, path string) {
		if arg != probes.ReturnArg {
			out = append(out, stageRead{what, arg, path})
		}
	}
	if r := st.Requests; r != nil {
		add("requests", r.Arg, r.IDPath())
	}
	if w := st.When; w != nil {
		add("when", w.Arg, w.Path)
	}
	if a := st.Accepted; a != nil {
		add("accepted", a.Arg, a.Path)
	}
	if d := st.Drafted; d != nil {
		add("drafted", d.Arg, d.Path)
	}
	return out
}

// maxShown bounds the items of a list FormatValue writes.
const maxShown = 8

// FormatValue writes a value read from a target briefly: a list's first
// items and its length, strs quoted (the target's bytes escaped).
func FormatValue(v pyproc.Value) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		if len(x) > 64 {
			x = x[:64] + "…"
		}
		return fmt.Sprintf("%q", x)
	case []pyproc.Value:
		var parts []string
		for _, it := range x[:min(len(x), maxShown)] {
			parts = append(parts, FormatValue(it))
		}
		s := "[" + strings.Join(parts, ", ")
		if len(x) > maxShown {
			s += fmt.Sprintf(", … %d in all", len(x))
		}
		return s + "]"
	case pyproc.Object:
		return fmt.Sprintf("<%s at %#x>", x.Type, x.Addr)
	}
	return fmt.Sprint(v)
}
