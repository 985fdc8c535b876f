package tracer

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanschema"
)

// liveSummary rewrites one status line on a terminal about once a second.
type liveSummary struct {
	w         io.Writer
	width     func() int // the terminal's columns; 0 when unknown (no limit)
	last      time.Time
	lastSteps uint64
	shown     bool
	gpu       *gpu.Sampler // GPU columns, nil for none
	accepted  bool         // steps carry accepted counts (not late, not absent from the spec)
}

func newLiveSummary(w io.Writer) *liveSummary {
	return &liveSummary{w: w, width: terminalWidth(w), last: time.Now()}
}

// terminalWidth asks the terminal behind w for its width at each refresh, so
// a resized window is followed.
func terminalWidth(w io.Writer) func() int {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return func() int { return 0 }
	}
	return func() int {
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return cols
	}
}

func (l *liveSummary) update(b *spanbuilder.Builder, events, drops uint64, procs []*export.QueueProcessor) {
	if l.w == nil || time.Since(l.last) < time.Second {
		return
	}
	now := time.Now()
	rate := float64(b.Stats.Steps-l.lastSteps) / now.Sub(l.last).Seconds()
	l.last, l.lastSteps = now, b.Stats.Steps
	var dropped uint64
	for _, p := range procs {
		_, d, _ := p.Stats()
		dropped += d
	}
	parts := []string{fmt.Sprintf("%.0f steps/s", rate)}
	parts = append(parts, stageParts(&b.Stats, l.accepted)...)
	if c := cudaLine(&b.Stats); c != "" {
		parts = append(parts, c)
	}
	parts = append(parts, fmt.Sprintf("events %d", events), fmt.Sprintf("drops %d", drops+dropped))
	if cols := l.gpu.LiveColumns(); cols != "" {
		parts = append(parts, cols)
	}
	l.write(parts)
}

// write replaces the line in place: back to its start, clear to its end,
// and never more than fits, since a line that wraps leaves its first row
// behind at every refresh.
func (l *liveSummary) write(parts []string) {
	fmt.Fprint(l.w, "\r\033[K"+fitLine(parts, l.width()))
	l.shown = true
}

// fitLine joins parts with two spaces, leaving out from the end what does
// not fit in width-1 columns (the last column would make some terminals
// wrap), and cuts the first part if even it is too wide. width 0: no limit.
func fitLine(parts []string, width int) string {
	line := strings.Join(parts, "  ")
	if width <= 0 {
		return line
	}
	limit := width - 1
	line = ""
	for i, p := range parts {
		next := p
		if i > 0 {
			next = line + "  " + p
		}
		if utf8.RuneCountInString(next) > limit {
			if i == 0 {
				return string([]rune(p)[:limit])
			}
			break
		}
		line = next
	}
	return line
}

func (l *liveSummary) clear() {
	if l.shown {
		fmt.Fprint(l.w, "\r\033[K")
	}
}

// stageLine gives each stage's latency and, where the steps carry accepted
// counts, the acceptance (late counts are on the Python summary line).
func stageLine(st *spanbuilder.Stats, accepted bool) string {
	return strings.Join(stageParts(st, accepted), "  ")
}

func stageParts(st *spanbuilder.Stats, accepted bool) []string {
	var parts []string
	for _, stage := range []string{spanschema.Draft, spanschema.Verify, spanschema.DraftExtend} {
		p50, ok := st.Percentile(stage, 50)
		if !ok {
			continue
		}
		p99, _ := st.Percentile(stage, 99)
		parts = append(parts, fmt.Sprintf("%s p50 %s p99 %s", stage, ms(p50), ms(p99)))
	}
	if accepted {
		parts = append(parts, acceptance(st))
	}
	return parts
}

func acceptance(st *spanbuilder.Stats) string {
	switch drafted := st.Drafted(); {
	case drafted > 0:
		return fmt.Sprintf("acceptance %.1f%% (%d/%d)", 100*float64(st.Accepted)/float64(drafted), st.Accepted, drafted)
	case st.Verifies > 0:
		return fmt.Sprintf("accepted %d drafts over %d verifies", st.Accepted, st.Verifies)
	}
	return "no verify yet"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/1e6) }

func printSummary(w io.Writer, r *Result, accepted bool) {
	st := &r.Stats
	fmt.Fprintf(w, "specprobe: detached (%s) after %s\n", r.Reason, r.Elapsed.Round(time.Millisecond))
	calls := ""
	for _, stage := range spanschema.Stages {
		if n := st.Calls[stage]; n > 0 {
			calls += fmt.Sprintf(" %s %d", stage, n)
		}
	}
	unnamed := ""
	if st.UnattributedSteps > 0 {
		unnamed = fmt.Sprintf(", %d naming no request", st.UnattributedSteps)
	}
	fmt.Fprintf(w, "  steps %d (%.1f/s%s)  calls:%s\n  %s\n", st.Steps, float64(st.Steps)/r.Elapsed.Seconds(), unnamed, calls, stageLine(st, accepted))
	if c := cudaLine(st); c != "" {
		fmt.Fprintf(w, "  %s\n", c)
	}
	fmt.Fprintf(w, "  events %d  kernel drops %d  unreadable values %d  calls with error %d  unattributed calls %d  unmatched exits %d\n",
		r.Read.Events, r.Drops, r.Read.ReadFailed, st.Errors, st.UnattributedCalls, st.UnmatchedExits)
	if l := cutLine(st); l != "" {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if p := r.Python; p != nil {
		fmt.Fprintf(w, "  python: requests read for %d calls, %d failed, %d too late (slowest read %s after the hit)%s\n",
			p.Reads, p.Failed, p.Late, p.MaxLag.Round(time.Microsecond), lastError(p.LastError))
		if p.WhenFromStep > 0 {
			fmt.Fprintf(w, "  python: %d calls whose when could not be read kept: a call within them passed its own (same_batch)\n", p.WhenFromStep)
		}
		if p.FromPush > 0 {
			fmt.Fprintf(w, "  python: %d calls whose temporary arguments were read at the call (the return found them freed)\n", p.FromPush)
		}
		if p.FromStep > 0 {
			fmt.Fprintf(w, "  python: %d calls without their own read took their step's requests (same_batch)\n", p.FromStep)
		}
		if st.Withdrawn > 0 {
			fmt.Fprintf(w, "  python: %d entries withdrawn: a reference to a stage's code taken outside a call, not a frame's push\n", st.Withdrawn)
		}
		if p.Skipped > 0 {
			fmt.Fprintf(w, "  python: %d calls left out by a stage's when\n", p.Skipped)
		}
		if p.Matched+p.Unmatched > 0 {
			fmt.Fprintf(w, "  python: accepted counts for %d verifies (%d drafts accepted, %.2f per verify), %d verifies without%s\n",
				p.Matched, p.AcceptedDrafts, float64(p.AcceptedDrafts)/float64(max(p.Matched, 1)), p.Unmatched, withoutWhy(p))
		}
	}
	for _, e := range r.Export {
		why := "queue full or flush timeout"
		if e.Shed > 0 {
			why += fmt.Sprintf("; %d of them for the memory limit", e.Shed)
		}
		fmt.Fprintf(w, "  exporter %s: %d spans exported, %d dropped (%s), %d failed%s\n", e.Name, e.Exported, e.Dropped, why, e.Failed, firstError(e.Err))
	}
	for _, l := range r.GPU {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

func firstError(e string) string {
	if e == "" {
		return ""
	}
	return "; first error: " + e
}

// cutLine names the calls closed without their exit, and the threads whose
// events the kernel lost ("" when none).
func cutLine(st *spanbuilder.Stats) string {
	if st.CutExitMissed+st.CutDropped == 0 && len(st.DroppedByThread) == 0 {
		return ""
	}
	line := fmt.Sprintf("calls cut: %d whose exit was never seen (exit_missed), %d on threads whose events the kernel lost (events_dropped)",
		st.CutExitMissed, st.CutDropped)
	if len(st.DroppedByThread) == 0 {
		return line
	}
	tids := make([]uint32, 0, len(st.DroppedByThread))
	for tid := range st.DroppedByThread {
		tids = append(tids, tid)
	}
	// The threads that lost most first; a few named, the rest counted.
	slices.SortFunc(tids, func(a, b uint32) int {
		return cmp.Or(cmp.Compare(st.DroppedByThread[b], st.DroppedByThread[a]), cmp.Compare(a, b))
	})
	var named []string
	for _, tid := range tids[:min(len(tids), 4)] {
		named = append(named, fmt.Sprintf("%d (%d)", tid, st.DroppedByThread[tid]))
	}
	if len(tids) > 4 {
		named = append(named, fmt.Sprintf("%d more", len(tids)-4))
	}
	return line + "; events lost on threads " + strings.Join(named, ", ")
}

func lastError(e string) string {
	if e == "" {
		return ""
	}
	return "; last failure: " + e
}

// withoutWhy says what left verifies without counts, where something did.
func withoutWhy(p *PyStats) string {
	var why []string
	if p.GaveUp > 0 {
		why = append(why, fmt.Sprintf("%d calls whose counts had not come %s after them", p.GaveUp, spanbuilder.DefaultGiveUpAfter))
	}
	if p.Restarts > 0 {
		why = append(why, fmt.Sprintf("count matching started over %d times, a verify or a read lost", p.Restarts))
	}
	if len(why) == 0 {
		return ""
	}
	return " (" + strings.Join(why, "; ") + ")"
}
