// Package testreport reads `go test -json` streams from the places the
// tests ran (the host and each kernel of the QEMU matrix, scripts/vmtest.sh)
// and says, per place and interpreter, what ran and what was skipped. A
// skipped test is not a pass: the summary fails when the tests that trace
// Python through hardware watchpoints ran nowhere, or skipped in a guest,
// where watchpoints always fire.
package testreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/specprobe/specprobe/internal/testinterp"
)

// NoWatchpoints begins the skip message of every test that needs hardware
// watchpoints that fire, where they do not: what the summary counts.
const NoWatchpoints = "watchpoints do not fire here"

// Event is one line of `go test -json` (test2json).
type Event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// Place is where one set of streams ran.
type Place struct {
	Name   string // "host", or the matrix's kernel name ("6.1")
	Kernel string // uname -r there
	Guest  bool   // a QEMU guest: watchpoints must fire
	Suite  string // what the matrix ran there
	Events []Event
}

// Result is one leaf test's outcome.
type Result struct {
	Package, Test, Action string
	Reason                string // a skip's or failure's last words
}

// ReadEvents parses a stream, skipping lines that are not events (a
// crashed test binary's last words).
func ReadEvents(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Action != "" {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// Results are the leaf tests' outcomes (a test with subtests counts through
// them), each with the last line it logged before a skip or failure.
func Results(events []Event) []Result {
	last, panicked := map[string]string{}, map[string]string{}
	var res []Result
	seen := map[string]int{}
	var running []Event // begun, no outcome yet
	for _, e := range events {
		if e.Test == "" {
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "run":
			running = append(running, e)
		case "output":
			line := strings.TrimSpace(e.Output)
			if line != "" && !strings.HasPrefix(line, "=== ") && !strings.HasPrefix(line, "--- ") {
				last[key] = fileLine.ReplaceAllString(e.Output, "")
			}
			if strings.HasPrefix(line, "panic: ") {
				panicked[key] = line
			}
		case "pass", "fail", "skip":
			running = slices.DeleteFunc(running, func(r Event) bool { return r.Package == e.Package && r.Test == e.Test })
			r := Result{Package: e.Package, Test: e.Test, Action: e.Action}
			if e.Action != "pass" {
				r.Reason = strings.TrimSpace(last[key])
			}
			if i, ok := seen[key]; ok {
				res[i] = r // -count > 1: the last run
				continue
			}
			seen[key] = len(res)
			res = append(res, r)
		}
	}
	// A test still running when the stream ended was cut short: the test
	// binary panicked (go test's -timeout) or was killed, and test2json
	// wrote no outcome for it or its package.
	for _, e := range running {
		key := e.Package + " " + e.Test
		why := panicked[key]
		if why == "" {
			why = "the run ended while it ran (a timeout or a crash): " + strings.TrimSpace(last[key])
		}
		res = append(res, Result{Package: e.Package, Test: e.Test, Action: "fail", Reason: why})
	}
	// A package that failed with no test failing in it (it did not build,
	// or its binary crashed or timed out between tests) failed itself.
	for _, e := range events {
		if e.Test == "" && e.Action == "fail" && !pkgFailed(res, e.Package) {
			res = append(res, Result{Package: e.Package, Action: "fail", Reason: "the package failed outside its tests (a build error, a crash, a timeout)"})
		}
	}
	var leaves []Result
	for _, r := range res {
		parent := false
		for _, o := range res {
			if r.Test != "" && o.Package == r.Package && strings.HasPrefix(o.Test, r.Test+"/") {
				parent = true
				break
			}
		}
		// A parent that failed with no failing subtest failed itself.
		if !parent || (r.Action == "fail" && !anyFailed(res, r)) {
			leaves = append(leaves, r)
		}
	}
	return leaves
}

func pkgFailed(res []Result, pkg string) bool {
	for _, o := range res {
		if o.Package == pkg && o.Action == "fail" {
			return true
		}
	}
	return false
}

func anyFailed(res []Result, parent Result) bool {
	for _, o := range res {
		if o.Package == parent.Package && strings.HasPrefix(o.Test, parent.Test+"/") && o.Action == "fail" {
			return true
		}
	}
	return false
}

// Interp is the interpreter a test ran on, by the subtest name
// testinterp.Name gave it, or "native".
func Interp(test string) string {
	for _, part := range strings.Split(test, "/") {
		for _, in := range testinterp.All {
			if part == in.Name {
				return in.Name
			}
		}
	}
	return "native"
}

// Line is one place's outcome on one interpreter.
type Line struct {
	Place                           *Place
	Interp                          string
	Passed, Failed, Skipped, NoFire int
	Reasons                         map[string]int // skip reasons and their counts
}

func (l Line) String() string {
	kind := "host "
	if l.Place.Guest {
		kind = "guest"
	}
	s := fmt.Sprintf("%s %-7s %-26s %-12s %4d passed, %d failed, %d skipped", kind, l.Place.Name, l.Place.Kernel, l.Interp, l.Passed, l.Failed, l.Skipped)
	if l.Skipped > 0 {
		var rs []string
		for r, n := range l.Reasons {
			rs = append(rs, fmt.Sprintf("%d: %s", n, shorten(r, 90)))
		}
		sort.Strings(rs)
		s += " (" + strings.Join(rs, "; ") + ")"
	}
	return s
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Lines are a place's outcomes, one per interpreter, native first.
func Lines(p *Place) []Line {
	by := map[string]*Line{}
	for _, r := range Results(p.Events) {
		in := Interp(r.Test)
		l := by[in]
		if l == nil {
			l = &Line{Place: p, Interp: in, Reasons: map[string]int{}}
			by[in] = l
		}
		switch r.Action {
		case "pass":
			l.Passed++
		case "fail":
			l.Failed++
		case "skip":
			l.Skipped++
			reason := r.Reason
			if strings.HasPrefix(reason, NoWatchpoints) {
				l.NoFire++
				reason = NoWatchpoints
			}
			l.Reasons[reason]++
		}
	}
	var out []Line
	for _, in := range append([]string{"native"}, names()...) {
		if l := by[in]; l != nil {
			out = append(out, *l)
		}
	}
	return out
}

func names() []string {
	var out []string
	for _, in := range testinterp.All {
		out = append(out, in.Name)
	}
	return out
}

// Verdict is what the summary finds wrong, if anything: failed tests, a
// guest whose Python tests skipped for want of watchpoints (they fire in
// every guest), a place that produced nothing, a guest of the matrix where
// no Python test ran, or, with requirePython, no place at all where the
// Python tests ran.
func Verdict(places []*Place, requirePython bool) []string {
	var bad []string
	fired := false
	for _, p := range places {
		lines := Lines(p)
		if len(lines) == 0 {
			bad = append(bad, fmt.Sprintf("%s: no test results (the run did not happen or crashed before its first test)", p.Name))
			continue
		}
		failed, nofire, ran := 0, 0, 0
		for _, l := range lines {
			failed += l.Failed
			nofire += l.NoFire
			if l.Interp != "native" {
				ran += l.Passed + l.Failed
			}
		}
		if failed > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d test(s) failed", p.Name, failed))
		}
		if p.Guest && (p.Suite == "python" || strings.HasPrefix(p.Suite, "smoke")) && ran == 0 {
			bad = append(bad, fmt.Sprintf("%s: no Python test ran, where its %s suite traces Python (it ended before them, or they skipped)", p.Name, p.Suite))
		}
		if nofire > 0 && p.Guest {
			bad = append(bad, fmt.Sprintf("%s: %d test(s) skipped because watchpoints did not fire, in a guest where they must", p.Name, nofire))
		}
		if nofire == 0 && ran > 0 {
			fired = true
		}
	}
	if requirePython && !fired {
		bad = append(bad, "no place ran the Python tests: watchpoints fire neither on this host nor in a guest that ran (the kernel matrix needs root and QEMU: scripts/vmtest.sh)")
	}
	return bad
}
