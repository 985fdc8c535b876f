package spanbuilder

import (
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/spanrec"
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
// takes part in steps and end with its last step. Spans are records
// (spanrec), handed to out a step at a time; a request's rid and thread
// attributes are one shared group its spans point to, and its resource is
// the session's.
type OTelSink struct {
	out      func([]*spanrec.Span)
	resource *spanrec.Resource
	scope    *spanrec.Scope
	ids      *spanrec.IDs
	reqs     map[string]*request
	batch    []*spanrec.Span // out's argument, reused
	stages   map[string]stageSpan
	// Chunks spans and attributes are carved from: one allocation for many
	// steps. Nothing carved is written again once handed on; a chunk is
	// freed when no queue holds a span of it.
	spanChunk []spanrec.Span
	kvChunk   []attribute.KeyValue
	// A request seen in no step for this long is finished: its root span ends
	// at the end of its last step.
	IdleAfter time.Duration
	// StageAttrs, when set, adds attributes to each stage span from its
	// interval (the GPU state that overlapped it, say).
	StageAttrs func(pid uint32, start, end time.Time) []attribute.KeyValue
	// Thread, when set, describes a thread for its span (label, ranks, host);
	// called once per request and thread.
	Thread func(pid, tid uint32) spanschema.Thread
	// Sampler, when set, decides which requests' spans are made.
	Sampler Sampler
	// Root names each request's root span and says what identifies it
	// (the spec's root:; "" is SGLang's style).
	Root spanschema.RootStyle
	// SampledOut counts the requests the sampler left out.
	SampledOut uint64
	// OnStep, when set, sees every step, with the trace and decode_loop
	// span it made (none, kept false, for a request sampled out): the
	// metrics, whose exemplars name the trace.
	OnStep func(s *Step, trace spanrec.TraceID, loop spanrec.SpanID, kept bool)
}

// Sampler decides, once per request from its trace id, whether its spans
// are kept; each span kept then carries the rate (specprobe.sampling.rate).
type Sampler interface {
	Sample(trace spanrec.TraceID) (keep bool, rate float64)
}

type request struct {
	root    spanrec.Span // ended with the request
	last    time.Time
	threads map[uint32]*threadSpans
	order   []uint32 // threads in the order seen, for a stable output
	loops   int64    // decode_ct of the request's next step
	keep    bool
	rate    []attribute.KeyValue // the sampling rate, when sampled
}

type threadSpans struct {
	span, forward spanrec.Span
	shared        *spanrec.Attrs // rid, thread.id (and the rate) of its other spans
	last          time.Time
}

// NewOTelSink returns a sink handing the spans it makes to out (which must
// not keep the slice), under resource and the instrumentation scope named
// scope.
func NewOTelSink(out func([]*spanrec.Span), resource *spanrec.Resource, scope string) *OTelSink {
	if resource == nil {
		resource = spanrec.NewResource(nil)
	}
	return &OTelSink{out: out, resource: resource, scope: &spanrec.Scope{Name: scope}, ids: spanrec.NewIDs(),
		reqs: map[string]*request{}, stages: map[string]stageSpan{}, IdleAfter: 2 * time.Second}
}

func (o *OTelSink) span(trace spanrec.TraceID, parent spanrec.SpanID, name string, start time.Time) spanrec.Span {
	return spanrec.Span{Name: name, Trace: trace, ID: o.ids.Span(), Parent: parent, Start: start.UnixNano(),
		Resource: o.resource, Scope: o.scope}
}

// Step implements Sink.
func (o *OTelSink) Step(s Step) {
	r := o.reqs[s.RequestID]
	if r == nil {
		r = o.newRequest(s)
	}
	r.last = maxTime(r.last, s.End)
	if !r.keep {
		if o.OnStep != nil {
			o.OnStep(&s, r.root.Trace, spanrec.SpanID{}, false)
		}
		return
	}
	th := r.threads[s.TID]
	if th == nil {
		th = o.newThread(r, s)
	}
	th.last = maxTime(th.last, s.End)
	ct := spanschema.KeyDecodeCt.Int64(r.loops)
	r.loops++

	// The step's spans and their own attributes, carved out of chunks.
	spans := o.newSpans(1 + len(s.Calls))
	var gpu [][]attribute.KeyValue
	n := 1 + s.CUDA.attrs()
	for i, c := range s.Calls {
		n += 1 + 2*len(c.Values) + c.CUDA.attrs()
		if c.Cut != "" {
			n++
		}
		if o.StageAttrs != nil {
			if gpu == nil {
				gpu = make([][]attribute.KeyValue, len(s.Calls))
			}
			gpu[i] = o.StageAttrs(c.PID, c.Start, c.End)
			n += len(gpu[i])
		}
	}
	kvs := o.newKVs(n)
	loop := &spans[0]
	*loop = o.span(r.root.Trace, th.forward.ID, spanschema.DecodeLoop, s.Start)
	loop.End, loop.Shared[0] = s.End.UnixNano(), th.shared
	kvs = s.CUDA.AppendAttrs(append(kvs, ct))
	loop.Own = kvs[0:len(kvs):len(kvs)]
	o.batch = append(o.batch[:0], loop)
	for i, c := range s.Calls {
		from := len(kvs)
		st := o.stage(c.Stage)
		kvs = append(kvs, ct)
		for _, v := range c.Values {
			kvs = spanschema.AppendValueAttrs(kvs, v.Name, v.V)
		}
		if c.Cut != "" {
			kvs = append(kvs, spanschema.KeyCut.String(c.Cut))
		}
		kvs = c.CUDA.AppendAttrs(kvs)
		if gpu != nil {
			kvs = append(kvs, gpu[i]...)
		}
		// Under decode_forward, beside the step's decode_loop, where SGLang puts them.
		sp := &spans[1+i]
		*sp = o.span(r.root.Trace, th.forward.ID, st.name, c.Start)
		sp.End, sp.Shared, sp.Own = c.End.UnixNano(), [2]*spanrec.Attrs{th.shared, st.attrs}, dedup(kvs[from:len(kvs):len(kvs)])
		if c.Err != "" {
			sp.Failed, sp.Err = true, c.Err
			loop.Failed, loop.Err = true, c.Err
		}
		o.batch = append(o.batch, sp)
	}
	if o.OnStep != nil {
		o.OnStep(&s, r.root.Trace, loop.ID, true)
	}
	o.out(o.batch)
	clear(o.batch)
}

// Window hands on a span outside any request, the root of a trace of its
// own: a gpu_window (the GPU over a window of its energy counter).
func (o *OTelSink) Window(name string, start, end time.Time, attrs []attribute.KeyValue) {
	sp := &o.newSpans(1)[0]
	*sp = o.span(o.ids.Trace(), spanrec.SpanID{}, name, start)
	sp.End, sp.Own = end.UnixNano(), attrs
	o.batch = append(o.batch[:0], sp)
	o.out(o.batch)
	clear(o.batch)
}

func (o *OTelSink) newRequest(s Step) *request {
	trace := o.ids.Trace()
	r := &request{keep: true, threads: map[uint32]*threadSpans{}}
	if o.Sampler != nil {
		keep, rate := o.Sampler.Sample(trace)
		r.keep, r.rate = keep, []attribute.KeyValue{spanschema.KeySamplingRate.Float64(rate)}
		if !keep {
			o.SampledOut++
		}
	}
	r.root = o.span(trace, spanrec.SpanID{}, o.Root.Name(s.RequestID), s.Start)
	r.root.Own = append(o.Root.Attrs(s.RequestID), r.rate...)
	o.reqs[s.RequestID] = r
	return r
}

func (o *OTelSink) newThread(r *request, s Step) *threadSpans {
	info := o.threadInfo(s.PID, s.TID)
	rid := spanschema.KeyRID.String(s.RequestID)
	th := &threadSpans{shared: spanrec.NewAttrs(append([]attribute.KeyValue{rid, spanschema.KeyThreadID.Int(int(s.TID))}, r.rate...)...)}
	th.span = o.span(r.root.Trace, r.root.ID, info.SpanName(), s.Start)
	th.span.Own = append(append(info.Attributes(), rid), r.rate...)
	th.forward = o.span(r.root.Trace, th.span.ID, spanschema.DecodeForward, s.Start)
	th.forward.Shared[0] = th.shared
	r.threads[s.TID] = th
	r.order = append(r.order, s.TID)
	return th
}

const sinkChunk = 256

func (o *OTelSink) newSpans(n int) []spanrec.Span {
	if cap(o.spanChunk)-len(o.spanChunk) < n {
		o.spanChunk = make([]spanrec.Span, 0, max(sinkChunk, n))
	}
	at := len(o.spanChunk)
	o.spanChunk = o.spanChunk[:at+n]
	return o.spanChunk[at : at+n : at+n]
}

func (o *OTelSink) newKVs(n int) []attribute.KeyValue {
	if cap(o.kvChunk)-len(o.kvChunk) < n {
		o.kvChunk = make([]attribute.KeyValue, 0, max(2*sinkChunk, n))
	}
	at := len(o.kvChunk)
	o.kvChunk = o.kvChunk[:at+n]
	return o.kvChunk[at : at : at+n]
}

// stageSpan is what every span of a stage has: its name, and its
// specprobe.stage attribute as a group of its own, made once.
type stageSpan struct {
	name  string
	attrs *spanrec.Attrs
}

func (o *OTelSink) stage(name string) stageSpan {
	st, ok := o.stages[name]
	if !ok {
		st = stageSpan{spanschema.StageSpan(name), spanrec.NewAttrs(spanschema.KeyStage.String(name))}
		o.stages[name] = st
	}
	return st
}

// dedup keeps one attribute per key, as the SDK does: the first one's
// place, the last one's value (a spec may read a value twice).
func dedup(kvs []attribute.KeyValue) []attribute.KeyValue {
	for i := 1; i < len(kvs); i++ {
		for j := 0; j < i; j++ {
			if kvs[j].Key == kvs[i].Key {
				kvs[j].Value = kvs[i].Value
				kvs = slices.Delete(kvs, i, i+1)
				i--
				break
			}
		}
	}
	return kvs
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
			o.end(r)
			delete(o.reqs, rid)
		}
	}
}

// Close ends every span still open.
func (o *OTelSink) Close() {
	for rid, r := range o.reqs {
		o.end(r)
		delete(o.reqs, rid)
	}
}

// OpenSpans lists the spans begun and not ended yet (End zero): the roots,
// thread and decode_forward spans of the requests still running.
func (o *OTelSink) OpenSpans() []*spanrec.Span {
	var out []*spanrec.Span
	for _, r := range o.reqs {
		if !r.keep {
			continue
		}
		root := r.root
		out = append(out, &root)
		for _, tid := range r.order {
			th := *r.threads[tid]
			out = append(out, &th.span, &th.forward)
		}
	}
	return out
}

func (o *OTelSink) end(r *request) {
	if !r.keep {
		return
	}
	out := o.batch[:0]
	for _, tid := range r.order {
		th := r.threads[tid]
		th.forward.End = th.last.UnixNano()
		th.span.End = th.last.UnixNano()
		out = append(out, &th.forward, &th.span)
	}
	r.root.End = r.last.UnixNano()
	o.out(append(out, &r.root))
	clear(out)
	o.batch = out[:0]
}
