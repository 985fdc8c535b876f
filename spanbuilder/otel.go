package spanbuilder

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// OTelSink turns steps into OpenTelemetry spans shaped like SGLang's own:
// a root `Req <rid[:8]>` per request, a `decode_forward` per step under it, and
// `spec_draft`, `spec_verify`, `spec_draft_extend` under each step.
type OTelSink struct {
	tracer trace.Tracer
	reqs   map[string]*request
	// A request seen in no step for this long is finished: its root span ends
	// at the end of its last step.
	IdleAfter time.Duration
	// StageAttrs, when set, adds attributes to each stage span from its
	// interval (the GPU state that overlapped it, say).
	StageAttrs func(pid uint32, start, end time.Time) []attribute.KeyValue
}

type request struct {
	ctx  context.Context
	root trace.Span
	last time.Time
}

// NewOTelSink returns a sink that creates spans with tracer.
func NewOTelSink(tracer trace.Tracer) *OTelSink {
	return &OTelSink{tracer: tracer, reqs: map[string]*request{}, IdleAfter: 2 * time.Second}
}

// SpanName maps a stage to its span name.
func SpanName(stage string) string { return "spec_" + stage }

// Step implements Sink.
func (o *OTelSink) Step(s Step) {
	r := o.reqs[s.RequestID]
	if r == nil {
		short := s.RequestID
		if len(short) > 8 {
			short = short[:8]
		}
		ctx, root := o.tracer.Start(context.Background(), "Req "+short,
			trace.WithNewRoot(), trace.WithTimestamp(s.Start),
			trace.WithAttributes(attribute.String("rid", s.RequestID), attribute.String("module", "specprobe::request")))
		r = &request{ctx: ctx, root: root}
		o.reqs[s.RequestID] = r
	}
	thread := attribute.Int("thread.id", int(s.TID))
	rid := attribute.String("rid", s.RequestID)
	stepCtx, step := o.tracer.Start(r.ctx, "decode_forward", trace.WithTimestamp(s.Start), trace.WithAttributes(rid, thread))
	for _, c := range s.Calls {
		attrs := []attribute.KeyValue{rid, thread, attribute.String("specprobe.stage", c.Stage)}
		for _, v := range c.Values {
			switch v.Name {
			case "num_correct_drafts":
				attrs = append(attrs, attribute.Int64("num_correct_drafts", v.V), attribute.Int64("accepted_tokens", v.V))
			case "num_drafts":
				attrs = append(attrs, attribute.Int64("num_drafts", v.V))
			case "ip", "exception": // where a watchpoint fired, a raised object: not span attributes
			default:
				attrs = append(attrs, attribute.Int64("specprobe."+v.Name, v.V))
			}
		}
		if o.StageAttrs != nil {
			attrs = append(attrs, o.StageAttrs(c.PID, c.Start, c.End)...)
		}
		_, sp := o.tracer.Start(stepCtx, SpanName(c.Stage), trace.WithTimestamp(c.Start), trace.WithAttributes(attrs...))
		if c.Err != "" {
			sp.SetStatus(codes.Error, c.Err)
			step.SetStatus(codes.Error, c.Err)
		}
		sp.End(trace.WithTimestamp(c.End))
	}
	step.End(trace.WithTimestamp(s.End))
	if s.End.After(r.last) {
		r.last = s.End
	}
}

// Expire ends the root spans of requests idle since before now-IdleAfter.
func (o *OTelSink) Expire(now time.Time) {
	for rid, r := range o.reqs {
		if now.Sub(r.last) >= o.IdleAfter {
			r.root.End(trace.WithTimestamp(r.last))
			delete(o.reqs, rid)
		}
	}
}

// Close ends every root span still open.
func (o *OTelSink) Close() {
	for rid, r := range o.reqs {
		r.root.End(trace.WithTimestamp(r.last))
		delete(o.reqs, rid)
	}
}
