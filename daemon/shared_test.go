package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/specprobe/specprobe/spanrec"
)

// blocked exports until release closes.
type blocked struct{ entered, release chan struct{} }

func (b blocked) Export(context.Context, []*spanrec.Span) error {
	b.entered <- struct{}{}
	<-b.release
	return nil
}

func (blocked) Shutdown(context.Context) error { return nil }

// A call waiting its turn behind a stalled export returns when its own
// context ends, and the turn passes on once the export is done.
func TestSharedExporterWaitEnds(t *testing.T) {
	b := blocked{entered: make(chan struct{}), release: make(chan struct{})}
	s := sharedExporter{make(chan struct{}, 1), b}
	first := make(chan error)
	go func() { first <- s.Export(context.Background(), nil) }()
	<-b.entered // the first call holds the turn
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error)
	go func() { waiting <- s.Export(ctx, nil) }()
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Errorf("a waiting call whose context ended returned %v, want context.Canceled", err)
	}
	close(b.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	go func() { <-b.entered }()
	if err := s.Export(context.Background(), nil); err != nil {
		t.Errorf("the next call, with the turn free: %v", err)
	}
}
