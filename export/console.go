package export

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/specprobe/specprobe/spanrec"
)

type console struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
	loc    *time.Location
}

// NewConsole prints one line per stage span, e.g.
//
//	12:00:00.000125 tid=4242 VERIFY        2.500ms rid=req-0001 num_correct_drafts=3
//
// Request and decode_forward spans are skipped: they would double every
// line's worth of information without saying anything about speculation.
// Batched calls are not merged, so each request of a batch gets its own
// line; that is what someone grepping for one rid wants. w is not closed.
func NewConsole(w io.Writer) Exporter { return &console{w: w, loc: time.Local} }

// FormatStageLine renders the line NewConsole would print for s, without
// the trailing newline; ok is false for spans that are not stage spans.
func FormatStageLine(s *spanrec.Span, loc *time.Location) (line string, ok bool) {
	si, ok := stageOf(s)
	if !ok {
		return "", false
	}
	var b strings.Builder
	dur := time.Duration(si.end - si.start)
	fmt.Fprintf(&b, "%s tid=%d %-12s %9.3fms rid=%s",
		time.Unix(0, si.start).In(loc).Format("15:04:05.000000"),
		si.tid, strings.ToUpper(si.stage), float64(dur)/float64(time.Millisecond), si.rid)
	if si.hasCorrect {
		fmt.Fprintf(&b, " num_correct_drafts=%d", si.correct)
	}
	if si.isErr {
		fmt.Fprintf(&b, " error=%q", si.err)
	}
	return b.String(), true
}

func (c *console) Export(ctx context.Context, spans []*spanrec.Span) error {
	var b strings.Builder
	for _, s := range spans {
		if line, ok := FormatStageLine(s, c.loc); ok {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errShutdown
	}
	if b.Len() == 0 {
		return nil
	}
	// One Write per batch keeps lines from interleaving with other writers
	// of a shared terminal as far as the OS allows.
	_, err := io.WriteString(c.w, b.String())
	return err
}

func (c *console) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
