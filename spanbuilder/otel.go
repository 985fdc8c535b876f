package spanbuilder

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/specprobe/specprobe/spanschema"
)

// OTelSink turns steps into OpenTelemetry spans shaped like SGLang's own
// request traces (package spanschema, docs/spans.md):
//
//	" Req <rid[:8]>"                       root, one trace per request
//	  "Scheduler [TP 0] (host:… | pid:N)"  one per thread the request ran on
//	    decode_forward                     the request's decode phase on that thread
//	      decode_loop                      one per step (decode_ct)
//	      spec_draft, spec_verify, spec_draft_extend
//
// The root, thread and decode_forward spans stay open while the request
// takes part in steps and end with its last step.
type OTelSink struct {
	tracer trace.Tracer
	reqs   map[string]*request
	// A request seen in no step for this long is finished: its root span ends
	// at the end of its last step.
	IdleAfter time.Duration
	// StageAttrs, when set, adds attributes to each stage span from its
	// interval (the GPU state that overlapped it, say).
	StageAttrs func(pid uint32, start, end time.Time) []attribute.KeyValue
	// Thread, when set, describes a thread for its span (label, ranks, host);
	// called once per request and thread.
	Thread func(pid, tid uint32) spanschema.Thread
}

type request struct {
	ctx     context.Context
	root    trace.Span
	last    time.Time
	threads map[uint32]*threadSpans
	loops   int64 // decode_ct of the request's next step
}

type threadSpans struct {
	span, forward trace.Span
	forwardCtx    context.Context
	last          time.Time
}

// NewOTelSink returns a sink that creates spans with tracer.
func NewOTelSink(tracer trace.Tracer) *OTelSink {
	return &OTelSink{tracer: tracer, reqs: map[string]*request{}, IdleAfter: 2 * time.Second}
}

// Step implements Sink.
func (o *OTelSink) Step(s Step) {
	r := o.reqs[s.RequestID]
	if r == nil {
		ctx, root := o.tracer.Start(context.Background(), spanschema.RootSpan("", s.RequestID),
			trace.WithNewRoot(), trace.WithTimestamp(s.Start),
			trace.WithAttributes(spanschema.KeyRID.String(s.RequestID), spanschema.KeyModule.String(spanschema.ModuleRequest)))
		r = &request{ctx: ctx, root: root, threads: map[uint32]*threadSpans{}}
		o.reqs[s.RequestID] = r
	}
	rid := spanschema.KeyRID.String(s.RequestID)
	thread := spanschema.KeyThreadID.Int(int(s.TID))
	th := r.threads[s.TID]
	if th == nil {
		info := o.threadInfo(s.PID, s.TID)
		tctx, span := o.tracer.Start(r.ctx, info.SpanName(), trace.WithTimestamp(s.Start),
			trace.WithAttributes(append(info.Attributes(), rid)...))
		fctx, fwd := o.tracer.Start(tctx, spanschema.DecodeForward, trace.WithTimestamp(s.Start), trace.WithAttributes(rid, thread))
		th = &threadSpans{span: span, forward: fwd, forwardCtx: fctx}
		r.threads[s.TID] = th
	}
	ct := spanschema.KeyDecodeCt.Int64(r.loops)
	r.loops++
	_, loop := o.tracer.Start(th.forwardCtx, spanschema.DecodeLoop, trace.WithTimestamp(s.Start), trace.WithAttributes(rid, thread, ct))
	for _, c := range s.Calls {
		attrs := []attribute.KeyValue{rid, thread, spanschema.KeyStage.String(c.Stage), ct}
		for _, v := range c.Values {
			attrs = append(attrs, spanschema.ValueAttrs(v.Name, v.V)...)
		}
		if o.StageAttrs != nil {
			attrs = append(attrs, o.StageAttrs(c.PID, c.Start, c.End)...)
		}
		// Under decode_forward, beside the step's decode_loop, where SGLang puts them.
		_, sp := o.tracer.Start(th.forwardCtx, spanschema.StageSpan(c.Stage), trace.WithTimestamp(c.Start), trace.WithAttributes(attrs...))
		if c.Err != "" {
			sp.SetStatus(codes.Error, c.Err)
			loop.SetStatus(codes.Error, c.Err)
		}
		sp.End(trace.WithTimestamp(c.End))
	}
	loop.End(trace.WithTimestamp(s.End))
	th.last = maxTime(th.last, s.End)
	r.last = maxTime(r.last, s.End)
}

func (o *OTelSink) threadInfo(pid, tid uint32) spanschema.Thread {
	if o.Thread != nil {
		return o.Thread(pid, tid)
	}
	return spanschema.Thread{Label: "thread", HostID: "unknown", TID: int(tid),
		TP: spanschema.NoRank, PP: spanschema.NoRank, DP: spanschema.NoRank}
}

// Expire ends the spans of requests idle since before now-IdleAfter.
func (o *OTelSink) Expire(now time.Time) {
	for rid, r := range o.reqs {
		if now.Sub(r.last) >= o.IdleAfter {
			r.end()
			delete(o.reqs, rid)
		}
	}
}

// Close ends every span still open.
func (o *OTelSink) Close() {
	for rid, r := range o.reqs {
		r.end()
		delete(o.reqs, rid)
	}
}

func (r *request) end() {
	for _, th := range r.threads {
		th.forward.End(trace.WithTimestamp(th.last))
		th.span.End(trace.WithTimestamp(th.last))
	}
	r.root.End(trace.WithTimestamp(r.last))
}
