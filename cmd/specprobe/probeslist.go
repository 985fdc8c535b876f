package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/specprobe/specprobe/probes"
)

// listRow is one catalog entry as `probes list` shows it.
type listRow struct {
	engine, worker, stages, matches, desc string
}

func catalogRows(specs []*probes.Spec) []listRow {
	rows := make([]listRow, 0, len(specs))
	for _, s := range specs {
		var stages []string
		for _, n := range probes.StageNames {
			if s.Stages[n] != nil {
				stages = append(stages, n)
			}
		}
		match := slices.Concat(s.Match.Exe, s.Match.Cmdline, s.Match.Library)
		for _, m := range s.Match.Module {
			match = append(match, "import "+m)
		}
		desc := s.Description
		if i := strings.Index(desc, ". "); i > 0 {
			desc = desc[:i]
		}
		rows = append(rows, listRow{s.Engine, s.Worker, strings.Join(stages, ","), strings.Join(match, ","), desc})
	}
	return rows
}

// writeList prints the rows as kubectl prints a table: the narrow form keeps
// the columns a person scans (engine, stages, description) and cuts the
// description so that a row fits width (0: no cut); wide adds the worker
// class and what the engine is matched by, and cuts nothing.
func writeList(out io.Writer, rows []listRow, width int, wide bool) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if wide {
		fmt.Fprintln(w, "ENGINE\tWORKER\tSTAGES\tMATCHES\tDESCRIPTION")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.engine, cmp.Or(r.worker, "-"), r.stages, r.matches, r.desc)
		}
		return w.Flush()
	}
	// tabwriter pads each column to its widest cell plus 2; the description
	// starts after the first two columns.
	engW, stgW := len("ENGINE"), len("STAGES")
	for _, r := range rows {
		engW = max(engW, utf8.RuneCountInString(r.engine))
		stgW = max(stgW, utf8.RuneCountInString(r.stages))
	}
	room := width - (engW + 2) - (stgW + 2)
	fmt.Fprintln(w, "ENGINE\tSTAGES\tDESCRIPTION")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.engine, r.stages, cut(r.desc, room, width > 0))
	}
	return w.Flush()
}

// cut shortens s to n runes, ending in "…" when something was cut. A table
// too narrow for any description keeps the marker alone.
func cut(s string, n int, limit bool) string {
	if !limit || utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

// listWidth is the terminal's width when stdout is one; piped output is not
// cut (there is no screen to wrap on), as kubectl does.
func listWidth(f *os.File) int {
	if !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}
