package loader

import (
	"fmt"
	"slices"
	"strings"

	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
)

// A spec names the argument each read starts from by a name, by one of
// several names (the program renamed it: batch, once model_worker_batch),
// or by its position in the signature. Which slot that is depends on the
// function the process runs, so it is decided here, at attach, against the
// code object; a spec that names an argument the function lacks is refused
// with the names it has, before anything is armed.

// ResolveArgs returns a copy of the Python stage st whose reads name the
// arguments code (the stage's code object) and caller (read_from's, nil
// without) have: each list of names becomes the first the function has,
// each position the name there, and every name is checked. qualname and
// callerName name the two functions in errors. st itself is not changed:
// one spec serves processes running different versions of a program.
func ResolveArgs(st *probes.Stage, code, caller *pyproc.CodeSlots, callerName string) (*probes.Stage, error) {
	out := *st
	fromCaller := st.ReadFrom != ""
	var err error
	pick := func(arg string, choice *probes.ArgChoice, fromCaller bool) string {
		if err != nil {
			return arg
		}
		c, name := code, st.Qualname
		if fromCaller {
			c, name = caller, callerName
		}
		var got string
		got, err = resolveArg(arg, choice, c)
		if m, ok := err.(*MissingNameError); ok {
			m.Stage, m.Func, m.Caller = st.Name, name, fromCaller
		}
		return got
	}
	if r := st.Requests; r != nil {
		c := *r
		c.Arg = pick(r.Arg, r.ArgChoice, fromCaller)
		out.Requests = &c
	}
	if w := st.When; w != nil {
		c := *w
		c.Arg = pick(w.Arg, w.ArgChoice, false)
		out.When = &c
	}
	for _, l := range []**probes.PyList{&out.Accepted, &out.Drafted} {
		if *l != nil {
			c := **l
			c.Arg = pick(c.Arg, c.ArgChoice, fromCaller)
			if c.Sub != nil {
				sub := *c.Sub
				sub.Arg = pick(sub.Arg, sub.ArgChoice, fromCaller)
				c.Sub = &sub
			}
			*l = &c
		}
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// resolveArg is the name a read starts from in code: arg itself (checked),
// the first of choice's names code has, or the name at choice's position.
func resolveArg(arg string, choice *probes.ArgChoice, code *pyproc.CodeSlots) (string, error) {
	if arg == probes.ReturnArg && choice == nil {
		return arg, nil
	}
	if code == nil {
		return "", fmt.Errorf("no code object to find argument %s in", arg)
	}
	missing := &MissingNameError{Position: -1, Args: paramNames(code), Locals: otherLocals(code)}
	switch {
	case choice == nil:
		if slices.Contains(code.Names, arg) {
			return arg, nil
		}
		missing.Names = []string{arg}
	case len(choice.Names) > 0:
		for _, n := range choice.Names {
			if slices.Contains(code.Names, n) {
				return n, nil
			}
		}
		missing.Names = choice.Names
	default:
		// Only a positional parameter has a position: a keyword-only one
		// is passed by name, *args and **kwargs are not one argument.
		if choice.Position < code.ArgCount && choice.Position < len(code.Names) {
			return code.Names[choice.Position], nil
		}
		missing.Position = choice.Position
	}
	return "", missing
}

// MissingNameError: the spec names an argument or local the function does
// not have (it was written for another version of the program).
type MissingNameError struct {
	Stage  string // the stage, "draft"
	Func   string // the function's qualified name
	Caller bool   // Func is the stage's read_from, not the stage itself
	// What the spec asked for: one name, several (any of them would do),
	// or the argument at Position (-1 when by name).
	Names    []string
	Position int
	// What the function has: its parameters as a signature (self, batch,
	// *, bs) and its other locals.
	Args, Locals []string
}

// maxLocalsShown bounds the locals an error lists: a long function has
// dozens, and the arguments are what a spec usually means.
const maxLocalsShown = 12

func (e *MissingNameError) Error() string {
	var b strings.Builder
	if e.Stage != "" {
		fmt.Fprintf(&b, "stage %s: ", e.Stage)
	}
	if e.Caller {
		b.WriteString("its read_from ")
	}
	if e.Func != "" {
		b.WriteString(e.Func + " ")
	}
	switch {
	case e.Position >= 0:
		fmt.Fprintf(&b, "has no positional argument %d", e.Position)
	case len(e.Names) == 1:
		fmt.Fprintf(&b, "has no argument %s", e.Names[0])
	default:
		fmt.Fprintf(&b, "has none of the arguments %s", strings.Join(e.Names, ", "))
	}
	fmt.Fprintf(&b, " (its arguments: %s", strings.Join(e.Args, ", "))
	if len(e.Args) == 0 {
		b.WriteString("none")
	}
	if n := len(e.Locals); n > 0 {
		shown := e.Locals[:min(n, maxLocalsShown)]
		fmt.Fprintf(&b, "; other locals: %s", strings.Join(shown, ", "))
		if n > len(shown) {
			fmt.Fprintf(&b, " and %d more", n-len(shown))
		}
	}
	b.WriteString(")")
	return b.String()
}

// paramNames writes code's parameters as a signature does: the positional
// ones, then * (or *args) before the keyword-only ones, then **kwargs.
func paramNames(code *pyproc.CodeSlots) []string {
	names := code.Names
	n := min(code.ArgCount, len(names))
	out := slices.Clone(names[:n])
	kw := names[n:min(n+code.KwOnlyArgCount, len(names))]
	rest := n + len(kw)
	if code.VarArgs && rest < len(names) {
		out = append(out, "*"+names[rest])
		rest++
	} else if len(kw) > 0 {
		out = append(out, "*")
	}
	out = append(out, kw...)
	if code.VarKeywords && rest < len(names) {
		out = append(out, "**"+names[rest])
	}
	return out
}

// otherLocals are code's local names that are not parameters, each once
// (3.10 names a captured argument again as a cell).
func otherLocals(code *pyproc.CodeSlots) []string {
	params := code.Params()
	var out []string
	for i, n := range code.Names {
		if i < params || slices.Contains(code.Names[:params], n) || slices.Contains(out, n) {
			continue
		}
		out = append(out, n)
	}
	return out
}
