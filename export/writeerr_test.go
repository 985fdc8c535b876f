package export_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specprobe/specprobe/export"
)

// fullDisk fails every write as a full disk does.
type fullDisk struct{ closed bool }

func (*fullDisk) Write([]byte) (int, error) { return 0, syscall.ENOSPC }
func (f *fullDisk) Close() error            { f.closed = true; return nil }

// TestWriteErrorsCounted: spans a file exporter could not write are counted
// failed, not exported, and the first error is kept: for otlp-file, which
// writes each batch, and for perfetto, which writes everything at Shutdown.
func TestWriteErrorsCounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		exp  export.Exporter
	}{
		{"otlp-file", export.NewOTLPFile(&fullDisk{})},
		{"perfetto", export.NewPerfettoNamed(&fullDisk{}, func(int64, int64) string { return "t" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qp := export.NewQueueProcessor(tc.exp, 64, 4, time.Hour, nil)
			endSpans(provider(qp), 10)
			err := qp.Shutdown(context.Background())
			exported, dropped, failed := qp.Stats()
			if exported != 0 || dropped != 0 || failed != 10 {
				t.Errorf("exported %d, dropped %d, failed %d; want 0, 0, 10", exported, dropped, failed)
			}
			if qerr := qp.Err(); !errors.Is(qerr, syscall.ENOSPC) {
				t.Errorf("Err() = %v, want the write's ENOSPC", qerr)
			}
			if tc.name == "perfetto" && !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("Shutdown = %v, want the write's ENOSPC", err)
			}
		})
	}
}

// TestQueueErrFirst: Err keeps the first error, not the last.
func TestQueueErrFirst(t *testing.T) {
	f := &fakeExporter{fail: true}
	qp := export.NewQueueProcessor(f, 64, 1, time.Hour, nil)
	if qp.Err() != nil {
		t.Fatalf("Err() before any export: %v", qp.Err())
	}
	endSpans(provider(qp), 3)
	_ = qp.Shutdown(context.Background())
	if err := qp.Err(); err == nil || !strings.Contains(err.Error(), "collector unavailable") {
		t.Errorf("Err() = %v", err)
	}
	if _, _, failed := qp.Stats(); failed != 3 {
		t.Errorf("failed %d, want 3", failed)
	}
}
