package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/pyproc"
	"github.com/specprobe/specprobe/tracer"
)

func checkCmd() *cobra.Command {
	var (
		pid      int
		specFile string
		engine   string
		anyRank  bool
	)
	cmd := &cobra.Command{
		Use:   "check FILE... | check --pid PID [--probes FILE | --engine NAME]",
		Short: "Check probe spec files, or a spec against a running process without attaching",
		Example: `  specprobe probes check my.yaml
  sudo specprobe probes check --pid 4242 --engine sglang`,
		Long: `With files: parse each spec and report its mistakes (FILE:LINE: what was expected).

With --pid: a dry run of attach against the live process, arming nothing (no BPF
program, no watchpoint, no change to the process): the spec (--probes, --engine, or
the catalog spec the process matches), the process's ranks, every stage resolved
(native: file, symbol, offset and first instruction; Python: the function's file and
line), every argument and path checked against the function the process runs and
compiled (read at the trap, or from user space and why), and, where a thread is
inside a stage's function now, its values read once. Exit status 1 if anything
would fail at attach.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if pid == 0 {
				if len(args) == 0 {
					return fmt.Errorf("give spec files to check, or --pid PID to check a spec against a running process")
				}
				if specFile != "" || engine != "" || anyRank {
					return fmt.Errorf("--probes, --engine and --any-rank go with --pid")
				}
				for _, f := range args {
					s, err := probes.Load(f)
					if err != nil {
						return err
					}
					fmt.Printf("%s: ok (engine %s, %d stages)\n", f, s.Engine, len(s.Stages))
				}
				return nil
			}
			if len(args) > 0 {
				return fmt.Errorf("with --pid the spec is --probes FILE or --engine NAME, not %s", strings.Join(args, " "))
			}
			if err := loader.CheckPID(pid); err != nil {
				return err
			}
			return checkLive(os.Stdout, pid, specFile, engine, anyRank)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&pid, "pid", "p", 0, "process to check the spec against (nothing is attached)")
	f.StringVar(&specFile, "probes", "", "with --pid: the spec file (default: the catalog spec the process matches)")
	f.StringVar(&engine, "engine", "", "with --pid: the catalog spec to check")
	f.BoolVar(&anyRank, "any-rank", false, "with --pid: check a process that is not the rank its spec traces, as attach --any-rank would trace it")
	return cmd
}

// checkLive is the dry run of attach against pid: it reports each step and
// returns an error when any would fail.
func checkLive(w io.Writer, pid int, file, engine string, anyRank bool) error {
	failed := 0
	fail := func(format string, args ...any) {
		failed++
		fmt.Fprintf(w, "  FAIL  "+format+"\n", args...)
	}
	args, _ := procfs.Cmdline(pid)
	title := probes.Title(args)
	spec, err := chooseSpec(pid, file, engine, anyRank, 0)
	var other *probes.OtherRankError
	switch {
	case errors.As(err, &other):
		// Still check the stages: the spec may be right for the traced rank.
		spec = other.Spec
		fmt.Fprintf(w, "PID %d (%s, %q): spec %s (%s)\n", pid, loader.Label(pid), title, spec.Label(), spec.File)
		fail("%v", err)
	case err != nil:
		return err
	default:
		fmt.Fprintf(w, "PID %d (%s, %q): spec %s (%s)\n", pid, loader.Label(pid), title, spec.Label(), spec.File)
	}
	if ranks, err := spec.Match.RanksOf(title); err == nil && len(ranks) > 0 {
		var parts []string
		for _, r := range ranks {
			parts = append(parts, fmt.Sprintf("%s %d", r.Rank.Name, r.Value))
		}
		fmt.Fprintf(w, "  ranks %s\n", strings.Join(parts, ", "))
	}
	placed, err := tracer.Place(spec, pid)
	if err != nil {
		return err
	}
	for _, p := range placed {
		if len(placed) > 1 || p.PID != pid {
			fmt.Fprintf(w, "  PID %d (%s) runs %s\n", p.PID, p.Label, strings.Join(p.Stages, ", "))
		}
		n, err := checkProcess(w, p.PID, p.Spec)
		if err != nil {
			return err
		}
		failed += n
	}
	// The kernel's verifier, not a feature list, decides whether attach
	// can load its programs here.
	if err := loader.VerifyPrograms(); err != nil {
		fail("%v", err)
	} else {
		fmt.Fprintf(w, "  ok    BPF programs: this kernel's verifier passes every program attach loads\n")
	}
	if failed > 0 {
		return fmt.Errorf("PID %d: %d problem(s) with spec %s; nothing was attached", pid, failed, spec.Engine)
	}
	fmt.Fprintf(w, "ok: every stage resolved and every read checked; nothing was attached\n")
	return nil
}

// checkProcess checks the stages spec puts in pid; it returns how many
// would fail.
func checkProcess(w io.Writer, pid int, spec *probes.Spec) (failed int, err error) {
	fail := func(format string, args ...any) {
		failed++
		fmt.Fprintf(w, "  FAIL  "+format+"\n", args...)
	}
	natives, err := loader.CheckNative(pid, spec, true)
	if err != nil {
		return 0, err
	}
	for i, c := range natives {
		if c.Err != nil {
			fail("%v", c.Err)
			continue
		}
		t := c.Target
		if i == 0 && t.Layout != nil {
			fmt.Fprintf(w, "  fields\n")
			for _, line := range t.Layout.Describe() {
				fmt.Fprintf(w, "        %s\n", line)
			}
		}
		fmt.Fprintf(w, "  ok    %-12s %s in %s at +%#x (%s)\n", c.Stage.Name, t.Symbol.Demangled, t.File.Path, t.Offset, t.First)
		for _, nv := range append(t.Stage.Boundaries()[0], t.Stage.Boundaries()[1]...) {
			if nv.Value.Origin != "" {
				name := nv.Name
				if name == "" {
					name = "request_id"
				}
				fmt.Fprintf(w, "        %-12s %s: %s from %s\n", "", name, nv.Value.Origin, nv.Value.From)
			}
		}
		if len(c.Stage.Values) > 0 || c.Stage.RequestID != nil {
			fmt.Fprintf(w, "        %-12s its values are read from registers at each call: none to read now\n", "")
		}
	}
	if spec.IsPython() {
		failed += checkPython(w, pid, spec)
	}
	return failed, nil
}

// checkPython reports the Python stages of spec in pid; it returns how
// many would fail.
func checkPython(w io.Writer, pid int, spec *probes.Spec) int {
	proc, err := pyproc.Attach(pid)
	if err != nil {
		fmt.Fprintf(w, "  FAIL  PID %d: %v\n", pid, err)
		return 1
	}
	defer proc.Close()
	fmt.Fprintf(w, "  python %s\n", proc.Version())
	failed := 0
	for _, c := range loader.CheckPython(proc, spec) {
		st := c.Stage
		if c.Err != nil {
			failed++
			fmt.Fprintf(w, "  FAIL  %v\n", c.Err)
			if c.NotYet {
				fmt.Fprintf(w, "        %-12s not imported yet: an engine imports its worker after loading the model (attach waits --import-wait for it)\n", "")
			}
			continue
		}
		t := c.Target
		fmt.Fprintf(w, "  ok    %-12s %s.%s at %s:%d\n", st.Name, st.Module, st.Qualname, t.Code.Filename, t.Code.FirstLine)
		if t.ReadFrom != nil {
			fmt.Fprintf(w, "        %-12s read_from %s at %s:%d\n", "", st.ReadFrom, t.ReadFrom.Filename, t.ReadFrom.FirstLine)
		}
		for _, r := range chosenArgs(st, t.Stage) {
			fmt.Fprintf(w, "        %-12s %s\n", "", r)
		}
		if r := t.Reads(); r != "" {
			fmt.Fprintf(w, "        %-12s %s\n", "", r)
		}
		switch live := c.Live; {
		case live == nil && (st.Requests != nil || st.Accepted != nil):
			fmt.Fprintf(w, "        %-12s no thread is in %s now: no values read\n", "", liveFunc(st))
		case live != nil:
			fmt.Fprintf(w, "        %-12s thread %d is in %s now; read once, while it runs:\n", "", live.TID, live.Func)
			for _, v := range live.Values {
				if v.Err != nil {
					fmt.Fprintf(w, "        %-12s   %s %s: %v\n", "", v.What, v.Path, v.Err)
				} else {
					fmt.Fprintf(w, "        %-12s   %s %s = %s\n", "", v.What, v.Path, loader.FormatValue(v.Value))
				}
			}
		}
	}
	return failed
}

// chosenArgs says which argument each read given as a list or a position
// resolved to.
func chosenArgs(spec, resolved *probes.Stage) []string {
	var out []string
	add := func(what string, c *probes.ArgChoice, arg string) {
		if c != nil {
			out = append(out, fmt.Sprintf("%s: arg %s is %s here", what, c, arg))
		}
	}
	if r := spec.Requests; r != nil {
		add("requests", r.ArgChoice, resolved.Requests.Arg)
	}
	if c := spec.When; c != nil {
		add("when", c.ArgChoice, resolved.When.Arg)
	}
	if a := spec.Accepted; a != nil {
		add("accepted", a.ArgChoice, resolved.Accepted.Arg)
	}
	if d := spec.Drafted; d != nil {
		add("drafted", d.ArgChoice, resolved.Drafted.Arg)
	}
	return out
}

func liveFunc(st *probes.Stage) string {
	if st.ReadFrom != "" {
		return st.ReadFrom
	}
	return st.Qualname
}
