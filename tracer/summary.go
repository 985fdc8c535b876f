package tracer

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/spanbuilder"
)

// liveSummary rewrites one status line on a terminal about once a second.
type liveSummary struct {
	w         io.Writer
	last      time.Time
	lastSteps uint64
	shown     bool
	gpu       *gpu.Sampler // GPU columns, nil for none
	accepted  bool         // steps carry accepted counts (not late, not absent from the spec)
}

func newLiveSummary(w io.Writer) *liveSummary { return &liveSummary{w: w, last: time.Now()} }

func (l *liveSummary) update(b *spanbuilder.Builder, s *loader.Session, procs []*export.QueueProcessor) {
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
	fmt.Fprintf(l.w, "\r\033[K%.0f steps/s  %s  events %d  drops %d", rate, stageLine(&b.Stats, l.accepted), s.Stats.Events, s.Drops()+dropped)
	if cols := l.gpu.LiveColumns(); cols != "" {
		fmt.Fprintf(l.w, "  %s", cols)
	}
	l.shown = true
}

func (l *liveSummary) clear() {
	if l.shown {
		fmt.Fprint(l.w, "\r\033[K")
	}
}

// stageLine gives each stage's latency and, where the steps carry accepted
// counts, the acceptance (late counts are on the Python summary line).
func stageLine(st *spanbuilder.Stats, accepted bool) string {
	var parts []string
	for _, stage := range []string{"draft", "verify", "draft_extend"} {
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
	return strings.Join(parts, "  ")
}

func acceptance(st *spanbuilder.Stats) string {
	switch {
	case st.Drafted > 0:
		return fmt.Sprintf("acceptance %.1f%% (%d/%d)", 100*float64(st.Accepted)/float64(st.Drafted), st.Accepted, st.Drafted)
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
	for _, stage := range []string{"draft", "verify", "accept", "draft_extend"} {
		if n := st.Calls[stage]; n > 0 {
			calls += fmt.Sprintf(" %s %d", stage, n)
		}
	}
	fmt.Fprintf(w, "  steps %d (%.1f/s)  calls:%s\n  %s\n", st.Steps, float64(st.Steps)/r.Elapsed.Seconds(), calls, stageLine(st, accepted))
	fmt.Fprintf(w, "  events %d  kernel drops %d  unreadable values %d  calls with error %d  unattributed calls %d  unmatched exits %d\n",
		r.Read.Events, r.Drops, r.Read.ReadFailed, st.Errors, st.UnattributedCalls, st.UnmatchedExits)
	if p := r.Python; p != nil {
		fmt.Fprintf(w, "  python: requests read for %d calls, %d failed, %d too late (slowest read %s after the hit)%s\n",
			p.Reads, p.Failed, p.Late, p.MaxLag.Round(time.Microsecond), lastError(p.LastError))
		if p.FromStep > 0 {
			fmt.Fprintf(w, "  python: %d calls without their own read took their step's requests (same_batch)\n", p.FromStep)
		}
		if p.Skipped > 0 {
			fmt.Fprintf(w, "  python: %d calls left out by a stage's when\n", p.Skipped)
		}
		if p.Matched+p.Unmatched > 0 {
			fmt.Fprintf(w, "  python: accepted counts for %d verifies (%d drafts accepted, %.2f per verify), %d verifies without\n",
				p.Matched, p.AcceptedDrafts, float64(p.AcceptedDrafts)/float64(max(p.Matched, 1)), p.Unmatched)
		}
	}
	for _, e := range r.Export {
		fmt.Fprintf(w, "  exporter %s: %d spans exported, %d dropped (queue full or flush timeout), %d failed\n", e.Name, e.Exported, e.Dropped, e.Failed)
	}
	for _, l := range r.GPU {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

func lastError(e string) string {
	if e == "" {
		return ""
	}
	return "; last failure: " + e
}
