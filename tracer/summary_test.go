package tracer

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/spanbuilder"
)

func TestFitLine(t *testing.T) {
	parts := []string{"12 steps/s", "draft p50 1.000ms p99 2.000ms", "events 9", "drops 0"}
	full := strings.Join(parts, "  ")
	for _, c := range []struct {
		width int
		want  string
	}{
		{0, full}, // width unknown: no limit
		{len(full) + 1, full},
		{len(full), "12 steps/s  draft p50 1.000ms p99 2.000ms  events 9"}, // the last column stays empty
		{45, "12 steps/s  draft p50 1.000ms p99 2.000ms"},
		{20, "12 steps/s"},
		{6, "12 st"}, // even the first part is cut rather than wrapped
		{1, ""},
	} {
		if got := fitLine(parts, c.width); got != c.want {
			t.Errorf("fitLine(width %d) = %q, want %q", c.width, got, c.want)
		}
	}
	// Columns are runes, not bytes.
	if got := fitLine([]string{"µµµµ", "x"}, 6); got != "µµµµ" {
		t.Errorf("fitLine(µ) = %q", got)
	}
}

// The live line on a 150-column terminal: every refresh replaces the last
// one in place and none is wider than the terminal.
func TestLiveLineFitsTerminal(t *testing.T) {
	var out bytes.Buffer
	l := newLiveSummary(&out)
	width := 150
	l.width = func() int { return width }
	st := statsWithAllStages(t)
	parts := append([]string{"1234 steps/s"}, stageParts(st, true)...)
	parts = append(parts, "events 123456789", "drops 0", "GPU 97% 1980MHz 612W 71°C throttle: sw_power_cap")
	if n := utf8.RuneCountInString(strings.Join(parts, "  ")); n <= width {
		t.Fatalf("the test line is %d columns: it must be wider than %d to test anything", n, width)
	}
	for i := 0; i < 3; i++ {
		l.write(parts)
		width = 80 // a resized terminal is followed at the next refresh
	}
	l.clear()
	refreshes := strings.Split(out.String(), "\r\033[K")
	if refreshes[0] != "" || len(refreshes) != 5 || refreshes[4] != "" {
		t.Fatalf("output %q: want 3 refreshes and a clear, each starting with \\r ESC[K", out.String())
	}
	for i, r := range refreshes[1:4] {
		if strings.ContainsAny(r, "\n\r") {
			t.Errorf("refresh %d has a line break: %q", i, r)
		}
		limit := 150
		if i > 0 {
			limit = 80
		}
		if n := utf8.RuneCountInString(r); n >= limit || n == 0 {
			t.Errorf("refresh %d is %d columns on a %d-column terminal: %q", i, n, limit, r)
		}
	}
}

// terminalWidth reads a real terminal's size (a pseudo-terminal set to 150
// columns) and gives 0 for what is not a terminal.
func TestTerminalWidth(t *testing.T) {
	if got := terminalWidth(&bytes.Buffer{})(); got != 0 {
		t.Errorf("width of a buffer = %d", got)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if got := terminalWidth(w)(); got != 0 {
		t.Errorf("width of a pipe = %d", got)
	}
	pts := openPTY(t)
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 150}); err != nil {
		t.Fatal(err)
	}
	if got := terminalWidth(pts)(); got != 150 {
		t.Errorf("width of a 150-column terminal = %d", got)
	}
}

func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pts: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}

type discard struct{}

func (discard) Step(spanbuilder.Step) {}

// statsWithAllStages runs five steps of a spec that reads num_drafts at both
// draft and verify (4 drafts each) and accepts 2 per step, plus two steps
// whose calls name no request.
func statsWithAllStages(t *testing.T) *spanbuilder.Stats {
	t.Helper()
	sites := []spanbuilder.Site{{Stage: "draft"}, {Stage: "verify", Batch: true}, {Stage: "accept"}, {Stage: "draft_extend", Batch: true}}
	b := spanbuilder.New(sites, spanbuilder.Clock{}, discard{})
	ev := func(ns uint64, site int, exit bool, rid string, kv ...any) {
		e := &spanbuilder.Event{BootNs: ns, TID: 1, Site: site, Exit: exit, RequestID: rid}
		for i := 0; i < len(kv); i += 2 {
			e.Values[e.NValues] = spanbuilder.Value{Name: kv[i].(string), V: int64(kv[i+1].(int))}
			e.NValues++
		}
		b.Add(e)
	}
	for i := uint64(0); i < 5; i++ {
		at := i * 1_000_000
		ev(at, 0, false, "r")
		ev(at+100_000, 0, true, "", "num_drafts", 4)
		ev(at+200_000, 1, false, "")
		ev(at+300_000, 1, true, "", "num_drafts", 4)
		ev(at+400_000, 2, false, "r", "num_correct_drafts", 2)
		ev(at+400_001, 2, true, "")
		ev(at+500_000, 3, false, "")
		ev(at+600_000, 3, true, "")
	}
	for i := uint64(5); i < 7; i++ { // a verify and draft-extend that named no request
		at := i * 1_000_000
		ev(at+200_000, 1, false, "")
		ev(at+300_000, 1, true, "")
		ev(at+500_000, 3, false, "")
		ev(at+600_000, 3, true, "")
	}
	b.Flush(10_000_000, "end")
	return &b.Stats
}

func TestSummaryLines(t *testing.T) {
	st := statsWithAllStages(t)
	var out bytes.Buffer
	printSummary(&out, &Result{Reason: "target PID 1 exited", Elapsed: 7 * time.Second, Stats: *st}, true)
	s := out.String()
	for _, want := range []string{
		"steps 7 (1.0/s, 2 naming no request)", // every step the target ran, attributed or not
		"acceptance 50.0% (10/20)",             // num_drafts at draft and verify counts the drafts once
		"unattributed calls 4",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

// TestFileErrors: a file exporter's failed spans fail the run; a
// collector's are counted only (an unreachable collector must not fail it).
func TestFileErrors(t *testing.T) {
	cfg := Config{Exporters: []export.Named{{Name: "otlp-file"}, {Name: "perfetto"}, {Name: "otlp-grpc"}}}
	for _, tc := range []struct {
		st   []ExportStats
		want string // "" for no error
	}{
		{[]ExportStats{{Name: "otlp-file", Exported: 5}, {Name: "perfetto", Exported: 5}, {Name: "otlp-grpc", Failed: 5, Err: "connection refused"}}, ""},
		{[]ExportStats{{Name: "otlp-file", Failed: 7, Err: "write spans.jsonl: no space left on device"}, {Name: "perfetto"}, {Name: "otlp-grpc"}},
			"exporter otlp-file: 7 spans not written: write spans.jsonl: no space left on device"},
		{[]ExportStats{{Name: "otlp-file"}, {Name: "perfetto", Failed: 3, Err: "file too large"}, {Name: "otlp-grpc"}},
			"exporter perfetto: 3 spans not written: file too large"},
	} {
		err := fileErrors(cfg, tc.st)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want no error", tc.st, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%+v: %v, want %q", tc.st, err, tc.want)
		}
	}
	var b bytes.Buffer
	printSummary(&b, &Result{Elapsed: time.Second, Export: []ExportStats{{Name: "perfetto", Failed: 3, Err: "file too large"}}}, false)
	if want := "exporter perfetto: 0 spans exported, 0 dropped (queue full or flush timeout), 3 failed; first error: file too large"; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
}

func TestSummaryNamesCutCalls(t *testing.T) {
	st := spanbuilder.Stats{CutExitMissed: 2, CutDropped: 7,
		DroppedByThread: map[uint32]uint64{11: 5, 12: 40, 13: 1, 14: 2, 15: 3, 16: 9}}
	var out bytes.Buffer
	printSummary(&out, &Result{Reason: "interrupted", Elapsed: time.Second, Stats: st}, false)
	want := "  calls cut: 2 whose exit was never seen (exit_missed), 7 on threads whose events the kernel lost (events_dropped); " +
		"events lost on threads 12 (40), 16 (9), 11 (5), 15 (3), 2 more\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary:\n%s\nwant the line\n%s", out.String(), want)
	}
	out.Reset()
	printSummary(&out, &Result{Reason: "interrupted", Elapsed: time.Second}, false)
	if strings.Contains(out.String(), "calls cut") {
		t.Errorf("a summary with nothing cut names cuts:\n%s", out.String())
	}
}

// Entries withdrawn as no call (a stripped interpreter's reference taken
// outside a call) are counted, and only where there were some.
func TestSummaryWithdrawn(t *testing.T) {
	for _, n := range []uint64{0, 3} {
		var out bytes.Buffer
		printSummary(&out, &Result{Elapsed: time.Second, Stats: spanbuilder.Stats{Withdrawn: n}, Python: &PyStats{}}, false)
		line := fmt.Sprintf("python: %d entries withdrawn", n)
		if n > 0 != strings.Contains(out.String(), line) || n == 0 && strings.Contains(out.String(), "withdrawn") {
			t.Errorf("%d withdrawn: summary\n%s", n, out.String())
		}
	}
}

// The accepted-counts line says why verifies went without, when they did.
func TestWithoutWhy(t *testing.T) {
	for _, c := range []struct {
		p    PyStats
		want string
	}{
		{PyStats{Matched: 10}, ""},
		{PyStats{Unmatched: 3, GaveUp: 1}, " (1 calls whose counts had not come 2s after them)"},
		{PyStats{Unmatched: 3, Restarts: 2}, " (count matching started over 2 times, a verify or a read lost)"},
		{PyStats{GaveUp: 1, Restarts: 1}, " (1 calls whose counts had not come 2s after them; count matching started over 1 times, a verify or a read lost)"},
	} {
		if got := withoutWhy(&c.p); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}
