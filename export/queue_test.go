package export_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/spanrec"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// fakeExporter blocks each Export until release is closed (if set) or
// the export ctx ends, like an OTLP client stuck on a dead endpoint.
type fakeExporter struct {
	release  chan struct{}
	entered  chan struct{} // receives once per Export call, if set
	fail     bool
	mu       sync.Mutex
	names    []string
	shutdown atomic.Bool
}

func (f *fakeExporter) Export(ctx context.Context, spans []*spanrec.Span) error {
	if f.entered != nil {
		select {
		case f.entered <- struct{}{}:
		default:
		}
	}
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.fail {
		return errors.New("collector unavailable")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range spans {
		f.names = append(f.names, s.Name)
	}
	return nil
}

func (f *fakeExporter) Shutdown(context.Context) error { f.shutdown.Store(true); return nil }

func (f *fakeExporter) count() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.names) }

func provider(p sdktrace.SpanProcessor) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
}

func endSpans(tp *sdktrace.TracerProvider, n int) {
	tr := tp.Tracer("q")
	for range n {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
}

func TestQueueProcessorNeverBlocks(t *testing.T) {
	f := &fakeExporter{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	qp := export.NewQueueProcessor(f, 8, 1, time.Hour, nil)
	tp := provider(qp)

	endSpans(tp, 1)
	<-f.entered // the worker now holds one span and is stuck exporting it

	start := time.Now()
	endSpans(tp, 1000)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("ending 1000 spans against a stuck exporter took %v", d)
	}
	_, dropped, _ := qp.Stats()
	if dropped < 1000-8 {
		t.Errorf("dropped = %d, want at least %d (queue holds 8)", dropped, 1000-8)
	}

	close(f.release)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exported, dropped, failed := qp.Stats()
	if exported+dropped != 1001 || failed != 0 || exported != uint64(f.count()) {
		t.Errorf("exported %d + dropped %d != 1001 (failed %d, exporter saw %d)", exported, dropped, failed, f.count())
	}
	if !f.shutdown.Load() {
		t.Error("exporter not shut down")
	}
}

func TestQueueProcessorShutdownDrains(t *testing.T) {
	f := &fakeExporter{}
	qp := export.NewQueueProcessor(f, 100, 7, time.Hour, nil) // ticker never fires
	tp := provider(qp)
	endSpans(tp, 50)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exported, dropped, _ := qp.Stats(); exported != 50 || dropped != 0 || f.count() != 50 {
		t.Errorf("exported %d dropped %d seen %d, want 50 0 50", exported, dropped, f.count())
	}
	endSpans(tp, 1) // after shutdown: ignored by the SDK, must not panic
}

func TestQueueProcessorForceFlushAndTicker(t *testing.T) {
	f := &fakeExporter{}
	qp := export.NewQueueProcessor(f, 100, 100, 20*time.Millisecond, nil)
	tp := provider(qp)
	defer tp.Shutdown(context.Background())
	endSpans(tp, 3)
	if err := qp.ForceFlush(context.Background()); err != nil || f.count() != 3 {
		t.Fatalf("ForceFlush: err %v, exported %d", err, f.count())
	}
	endSpans(tp, 2)
	deadline := time.Now().Add(2 * time.Second)
	for f.count() != 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if f.count() != 5 {
		t.Errorf("ticker flush: exported %d, want 5", f.count())
	}
}

func TestQueueProcessorCountsFailures(t *testing.T) {
	f := &fakeExporter{fail: true}
	qp := export.NewQueueProcessor(f, 100, 4, time.Hour, nil)
	tp := provider(qp)
	endSpans(tp, 10)
	_ = tp.Shutdown(context.Background())
	if exported, dropped, failed := qp.Stats(); exported != 0 || dropped != 0 || failed != 10 {
		t.Errorf("stats = %d %d %d, want 0 0 10", exported, dropped, failed)
	}
}

func TestQueueProcessorShutdownHonoursDeadline(t *testing.T) {
	f := &fakeExporter{release: make(chan struct{})} // never released
	qp := export.NewQueueProcessor(f, 100, 5, time.Hour, nil)
	tp := provider(qp)
	endSpans(tp, 20)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := tp.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown err = %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v past a 100ms deadline", d)
	}
	exported, dropped, failed := qp.Stats()
	if exported != 0 || dropped+failed != 20 {
		t.Errorf("stats = %d %d %d, want every span accounted as dropped or failed", exported, dropped, failed)
	}
}
