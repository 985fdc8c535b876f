package export

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// QueueProcessor is a SpanProcessor whose OnEnd never blocks. The SDK's
// BatchSpanProcessor can be configured as non-blocking too, but it does
// not expose how much it dropped or failed, and the probe needs those
// numbers to tell a quiet server from a lossy pipeline.
type QueueProcessor struct {
	exp        sdktrace.SpanExporter
	queue      chan sdktrace.ReadOnlySpan
	batchSize  int
	flushEvery time.Duration

	flushReq chan flushReq
	stop     chan struct{}
	done     chan struct{}
	// cancel aborts an export in flight when Shutdown's deadline passes, so
	// a hung endpoint cannot keep the worker (and the process) alive.
	ctx    context.Context
	cancel context.CancelFunc

	// enq guards stopped against OnEnd racing Shutdown: without it a span
	// could land in the queue after Shutdown's final drain and vanish from
	// Stats. OnEnd only ever TryRLocks it, so it still never waits.
	enq      sync.RWMutex
	stopped  atomic.Bool
	shutOnce sync.Once
	shutErr  error

	exported, dropped, failed atomic.Uint64
}

type flushReq struct {
	ctx  context.Context
	done chan error
}

// NewQueueProcessor starts the worker goroutine. Non-positive arguments get
// defaults (queue 2048, batch 512, flush every 1s) matching the SDK's.
func NewQueueProcessor(exp sdktrace.SpanExporter, queueSize, batchSize int, flushEvery time.Duration) *QueueProcessor {
	if queueSize <= 0 {
		queueSize = 2048
	}
	if batchSize <= 0 {
		batchSize = 512
	}
	batchSize = min(batchSize, queueSize)
	if flushEvery <= 0 {
		flushEvery = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &QueueProcessor{
		exp: exp, queue: make(chan sdktrace.ReadOnlySpan, queueSize),
		batchSize: batchSize, flushEvery: flushEvery,
		flushReq: make(chan flushReq), stop: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel,
	}
	go p.run()
	return p
}

// Stats reports spans handed to the exporter successfully, spans dropped
// (queue full, or still queued when Shutdown gave up), and spans in
// batches the exporter returned an error for.
func (p *QueueProcessor) Stats() (exported, dropped, failed uint64) {
	return p.exported.Load(), p.dropped.Load(), p.failed.Load()
}

func (p *QueueProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *QueueProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if !p.enq.TryRLock() {
		p.dropped.Add(1) // Shutdown is in progress
		return
	}
	defer p.enq.RUnlock()
	if p.stopped.Load() {
		p.dropped.Add(1)
		return
	}
	select {
	case p.queue <- s:
	default:
		p.dropped.Add(1)
	}
}

// ForceFlush exports everything queued before the call. It returns
// ctx.Err() if the deadline passes first; the export keeps going.
func (p *QueueProcessor) ForceFlush(ctx context.Context) error {
	if p.stopped.Load() {
		return nil
	}
	return p.requestFlush(ctx)
}

func (p *QueueProcessor) requestFlush(ctx context.Context) error {
	r := flushReq{ctx: ctx, done: make(chan error, 1)}
	select {
	case p.flushReq <- r:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown drains the queue within ctx's deadline, then shuts the
// exporter down. Whatever could not be exported in time counts as dropped.
func (p *QueueProcessor) Shutdown(ctx context.Context) error {
	p.shutOnce.Do(func() {
		p.enq.Lock()
		p.stopped.Store(true)
		p.enq.Unlock()
		err := p.requestFlush(ctx)
		if err != nil {
			p.cancel() // unblock a hung ExportSpans
		}
		close(p.stop)
		<-p.done
		// Spans the worker left behind when it gave up at the deadline.
		for n := len(p.queue); n > 0; n-- {
			<-p.queue
			p.dropped.Add(1)
		}
		if e := p.exp.Shutdown(ctx); err == nil {
			err = e
		}
		p.cancel()
		p.shutErr = err
	})
	return p.shutErr
}

func (p *QueueProcessor) run() {
	defer close(p.done)
	t := time.NewTicker(p.flushEvery)
	defer t.Stop()
	batch := make([]sdktrace.ReadOnlySpan, 0, p.batchSize)
	for {
		// Checked first because select picks randomly among ready cases,
		// and after an aborted shutdown the queue may still look busy.
		select {
		case <-p.stop:
			p.dropped.Add(uint64(len(batch)))
			return
		default:
		}
		select {
		case s := <-p.queue:
			batch = append(batch, s)
			if len(batch) >= p.batchSize {
				batch = p.export(p.ctx, batch)
			}
		case <-t.C:
			batch = p.export(p.ctx, batch)
		case r := <-p.flushReq:
			r.done <- p.drain(r.ctx, batch)
			batch = batch[:0]
		case <-p.stop:
			p.dropped.Add(uint64(len(batch)))
			return
		}
	}
}

// drain exports batch plus what is queued right now. It stops at the
// length seen on entry so that a steady stream of OnEnd calls cannot turn
// a flush into an endless loop.
func (p *QueueProcessor) drain(ctx context.Context, batch []sdktrace.ReadOnlySpan) error {
	// Honour both the caller's deadline and Shutdown's abort.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()

	for n := len(p.queue); n > 0; n-- {
		batch = append(batch, <-p.queue)
		if len(batch) >= p.batchSize {
			if ctx.Err() != nil {
				break
			}
			batch = p.export(ctx, batch)
		}
	}
	if ctx.Err() == nil {
		batch = p.export(ctx, batch)
	}
	if err := ctx.Err(); err != nil {
		// Give up on the rest: count it rather than export it late.
		p.dropped.Add(uint64(len(batch)))
		return err
	}
	return nil
}

// export returns batch emptied so the caller can reuse its storage; the
// exporter must not keep the slice (the SDK contract says so).
func (p *QueueProcessor) export(ctx context.Context, batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(batch) == 0 {
		return batch
	}
	n := uint64(len(batch))
	if err := p.exp.ExportSpans(ctx, batch); err != nil {
		p.failed.Add(n)
	} else {
		p.exported.Add(n)
	}
	clear(batch)
	return batch[:0]
}
