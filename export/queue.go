package export

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/specprobe/specprobe/spanrec"
)

// QueueProcessor hands spans to one exporter from a bounded queue that
// never blocks its caller: past its size, or its Budget of bytes, spans
// are dropped and counted, so a slow or unreachable collector costs spans,
// never the reader's time nor memory past the budget.
// The span builder's sink pushes records (Push); it is also an SDK
// SpanProcessor, for spans made with the OpenTelemetry SDK.
type QueueProcessor struct {
	exp        Exporter
	size       int     // spans waiting or being exported, at most
	budget     *Budget // their bytes (spanrec's Cost), when set
	batchSize  int
	flushEvery time.Duration

	mu       sync.Mutex
	waiting  []*spanrec.Span
	inFlight int // taken by the worker, not yet exported
	stopped  bool

	kick     chan struct{} // a batch is full
	flushReq chan flushReq
	stop     chan struct{}
	done     chan struct{}
	// cancel aborts an export in flight when Shutdown's deadline passes, so
	// a hung endpoint cannot keep the worker (and the process) alive.
	ctx    context.Context
	cancel context.CancelFunc

	shutOnce sync.Once
	shutErr  error
	sdkRes   map[any]*spanrec.Resource // OnEnd's resources, converted once

	exported, dropped, failed atomic.Uint64
	firstErr                  atomic.Pointer[error] // the exporter's first error
	shed                      atomic.Uint64         // of dropped: no room in the budget
}

// WritesAtShutdown marks an exporter that keeps the spans it is given and
// writes them all at Shutdown (Perfetto's one JSON document): when its
// Shutdown fails, none of the spans it took was written.
type WritesAtShutdown interface{ WritesAtShutdown() }

type flushReq struct {
	ctx  context.Context
	done chan error
}

// NewQueueProcessor starts the worker goroutine. Non-positive arguments get
// defaults (queue 2048, batch 512, flush every 1s) matching the SDK's. A
// budget, when not nil, also holds the bytes of the spans waiting or being
// exported; queues may share one.
func NewQueueProcessor(exp Exporter, queueSize, batchSize int, flushEvery time.Duration, budget *Budget) *QueueProcessor {
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
		exp: exp, size: queueSize, budget: budget, batchSize: batchSize, flushEvery: flushEvery,
		kick: make(chan struct{}, 1), flushReq: make(chan flushReq), stop: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel, sdkRes: map[any]*spanrec.Resource{},
	}
	go p.run()
	return p
}

// Exporter is the exporter the processor feeds.
func (p *QueueProcessor) Exporter() Exporter { return p.exp }

// Stats reports spans handed to the exporter successfully, spans dropped
// (queue full, or still queued when Shutdown gave up), and spans in
// batches the exporter returned an error for.
func (p *QueueProcessor) Stats() (exported, dropped, failed uint64) {
	return p.exported.Load(), p.dropped.Load(), p.failed.Load()
}

// Err is the first error the exporter returned, from an export or from
// its Shutdown; nil when there was none.
func (p *QueueProcessor) Err() error {
	if e := p.firstErr.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *QueueProcessor) noteErr(err error) { p.firstErr.CompareAndSwap(nil, &err) }

// Shed is how many of the dropped spans were dropped because the budget
// had no room for them.
func (p *QueueProcessor) Shed() uint64 { return p.shed.Load() }

// Push queues spans, or counts them dropped when the queue is full or shut
// down. It holds a lock only to append: the worker never exports under it.
// Spans pushed together (a step's) are kept or shed together by the budget.
func (p *QueueProcessor) Push(spans ...*spanrec.Span) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		p.dropped.Add(uint64(len(spans)))
		return
	}
	room := max(0, p.size-len(p.waiting)-p.inFlight)
	n := min(room, len(spans))
	if n > 0 && p.budget != nil && !p.budget.take(cost(spans[:n])) {
		p.shed.Add(uint64(n))
		n = 0
	}
	p.waiting = append(p.waiting, spans[:n]...)
	full := len(p.waiting) >= p.batchSize
	p.mu.Unlock()
	if n < len(spans) {
		p.dropped.Add(uint64(len(spans) - n))
	}
	if full {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// OnStart implements sdktrace.SpanProcessor.
func (p *QueueProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues an SDK span's record (sdktrace.SpanProcessor).
func (p *QueueProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	p.mu.Lock()
	rec := spanrec.FromSDK(s, p.sdkRes)
	p.mu.Unlock()
	p.Push(rec)
}

// ForceFlush exports everything queued before the call. It returns
// ctx.Err() if the deadline passes first; the export keeps going.
func (p *QueueProcessor) ForceFlush(ctx context.Context) error {
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
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
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		err := p.requestFlush(ctx)
		if err != nil {
			p.cancel() // unblock a hung export
		}
		close(p.stop)
		<-p.done
		// Spans the worker left behind when it gave up at the deadline.
		p.mu.Lock()
		p.dropped.Add(uint64(len(p.waiting)))
		p.release(p.waiting)
		p.waiting = nil
		p.mu.Unlock()
		e := p.exp.Shutdown(ctx)
		if e != nil {
			p.noteErr(e)
			if _, ok := p.exp.(WritesAtShutdown); ok {
				p.failed.Add(p.exported.Swap(0))
			}
		}
		if err == nil {
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
	var spare []*spanrec.Span
	for {
		// Checked first because select picks randomly among ready cases.
		select {
		case <-p.stop:
			return
		default:
		}
		select {
		case <-p.kick:
			spare = p.exportWaiting(p.ctx, spare, true)
		case <-t.C:
			spare = p.exportWaiting(p.ctx, spare, false)
		case r := <-p.flushReq:
			r.done <- p.drain(r.ctx, &spare)
		case <-p.stop:
			return
		}
	}
}

// take moves what waits to the worker: whole batches only, unless all.
func (p *QueueProcessor) take(spare []*spanrec.Span, wholeBatches bool) []*spanrec.Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.waiting)
	if wholeBatches {
		n -= n % p.batchSize
	}
	batch := append(spare[:0], p.waiting[:n]...)
	rest := copy(p.waiting, p.waiting[n:])
	clear(p.waiting[rest:])
	p.waiting = p.waiting[:rest]
	p.inFlight += n
	return batch
}

// exportWaiting exports what waits, a batch at a time, and returns the
// emptied slice for reuse.
func (p *QueueProcessor) exportWaiting(ctx context.Context, spare []*spanrec.Span, wholeBatches bool) []*spanrec.Span {
	batch := p.take(spare, wholeBatches)
	for i := 0; i < len(batch); i += p.batchSize {
		p.export(ctx, batch[i:min(len(batch), i+p.batchSize)])
	}
	clear(batch)
	return batch[:0]
}

// drain exports what is queued right now, within ctx and Shutdown's abort.
func (p *QueueProcessor) drain(ctx context.Context, spare *[]*spanrec.Span) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	batch := p.take(*spare, false)
	defer func() { clear(batch); *spare = batch[:0] }()
	for i := 0; i < len(batch); i += p.batchSize {
		if ctx.Err() != nil {
			// Give up on the rest: count it rather than export it late.
			n := len(batch) - i
			p.dropped.Add(uint64(n))
			p.release(batch[i:])
			p.mu.Lock()
			p.inFlight -= n
			p.mu.Unlock()
			return ctx.Err()
		}
		p.export(ctx, batch[i:min(len(batch), i+p.batchSize)])
	}
	return ctx.Err()
}

// export hands one batch to the exporter, which must not keep the slice.
func (p *QueueProcessor) export(ctx context.Context, batch []*spanrec.Span) {
	if len(batch) == 0 {
		return
	}
	n := uint64(len(batch))
	if err := p.exp.Export(ctx, batch); err != nil {
		p.failed.Add(n)
		p.noteErr(err)
	} else {
		p.exported.Add(n)
	}
	p.release(batch)
	p.mu.Lock()
	p.inFlight -= len(batch)
	p.mu.Unlock()
}

// release gives the budget back the bytes of spans no longer queued.
func (p *QueueProcessor) release(spans []*spanrec.Span) {
	if p.budget != nil {
		p.budget.give(cost(spans))
	}
}
