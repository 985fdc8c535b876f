package export

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
)

// sliceKey identifies one real call on one thread. A batched verify is
// reported once per request in the batch with identical bounds, so this is
// also the dedup key.
type sliceKey struct {
	pid, tid   int64
	stage      string
	start, end int64
}

type stageSlice struct {
	rids    []string
	correct map[string]int64
	err     string
}

// asyncSpan is a request's root, thread, decode_forward or decode_loop
// span, drawn on a per-request async track (keyed by trace id, one trace
// per request) and nested as the spans are.
type asyncSpan struct {
	pid        int64
	trace      trace.TraceID
	id, parent trace.SpanID
	name       string
	start, end int64
	rid, err   string
}

type perfetto struct {
	mu       sync.Mutex
	w        io.WriteCloser
	closed   bool
	order    []sliceKey
	slices   map[sliceKey]*stageSlice
	async    []asyncSpan
	threads  map[[2]int64]string // a thread track's name
	counters []Counter           // GPU counter tracks
	procs    map[int64]string
	// threadName names a thread's track when it is first seen.
	threadName func(pid, tid int64) string
}

// NewPerfetto keeps the spans in memory and writes one Chrome/Perfetto JSON
// trace at Shutdown, then closes w: the format is a single JSON object, so
// there is nothing valid to write earlier. Stage spans become complete
// events on one track per OS thread, named by the thread's name as the
// kernel has it when the thread is first seen; a request's other spans
// become nested async slices on one track per request.
func NewPerfetto(w io.WriteCloser) Exporter { return NewPerfettoNamed(w, ThreadName) }

func (p *perfetto) Export(ctx context.Context, spans []*spanrec.Span) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errShutdown
	}
	for _, s := range spans {
		pid := p.process(s)
		if si, ok := stageOf(s); ok {
			p.addStage(pid, si)
			continue
		}
		a := asyncSpan{pid: pid, trace: trace.TraceID(s.Trace), id: trace.SpanID(s.ID), parent: trace.SpanID(s.Parent),
			name: s.Name, start: s.Start, end: s.End, rid: attrString(s, spanschema.KeyRID)}
		if s.Failed {
			a.err = cmp.Or(s.Err, "error")
		}
		p.async = append(p.async, a)
	}
	return nil
}

// process returns the pid the resource names, remembering service.name so
// the process track gets a readable title.
func (p *perfetto) process(s *spanrec.Span) int64 {
	var pid int64
	var name string
	if r := s.Resource; r != nil {
		for _, kv := range r.Attrs {
			switch kv.Key {
			case spanschema.KeyProcessPID:
				pid = intOf(kv.Value)
			case spanschema.KeyServiceName:
				name = kv.Value.AsString()
			}
		}
	}
	if _, seen := p.procs[pid]; !seen || p.procs[pid] == "" {
		p.procs[pid] = name
	}
	return pid
}

func (p *perfetto) addStage(pid int64, si stageInfo) {
	k := sliceKey{pid, si.tid, si.stage, si.start, si.end}
	sl, ok := p.slices[k]
	if !ok {
		sl = &stageSlice{correct: map[string]int64{}}
		p.slices[k] = sl
		p.order = append(p.order, k)
		if t := [2]int64{pid, si.tid}; p.threads[t] == "" {
			p.threads[t] = p.threadName(pid, si.tid)
		}
	}
	if si.rid != "" && !slices.Contains(sl.rids, si.rid) {
		sl.rids = append(sl.rids, si.rid)
	}
	if si.hasCorrect && si.rid != "" {
		sl.correct[si.rid] = si.correct
	}
	if si.isErr && sl.err == "" {
		sl.err = si.err
	}
}

// WritesAtShutdown: every span is written at Shutdown (QueueProcessor).
func (*perfetto) WritesAtShutdown() {}

func (p *perfetto) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	bw := bufio.NewWriter(p.w)
	err := writeTrace(bw, p.events())
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := p.w.Close(); err == nil {
		err = cerr
	}
	return err
}

// traceEvent is one entry of the Trace Event Format. ts and dur are
// json.Number so microseconds keep all three nanosecond digits: a float64
// cannot hold a unix-epoch microsecond count to that precision.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   json.Number    `json:"ts,omitempty"`
	Dur  json.Number    `json:"dur,omitempty"`
	Pid  int64          `json:"pid"`
	Tid  int64          `json:"tid"`
	ID   string         `json:"id,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

func micros(ns int64) json.Number {
	ns = max(ns, 0)
	return json.Number(fmt.Sprintf("%d.%03d", ns/1000, ns%1000))
}

func writeTrace(w io.Writer, evs []traceEvent) error {
	if _, err := io.WriteString(w, `{"traceEvents":[`); err != nil {
		return err
	}
	for i, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		sep := ",\n"
		if i == 0 {
			sep = "\n"
		}
		if _, err := io.WriteString(w, sep+string(b)); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\n],\"displayTimeUnit\":\"ms\"}\n")
	return err
}

// NewPerfettoNamed is NewPerfetto with the thread tracks named by
// threadName (spans recorded elsewhere, tests) instead of /proc.
func NewPerfettoNamed(w io.WriteCloser, threadName func(pid, tid int64) string) Exporter {
	return &perfetto{w: w, slices: map[sliceKey]*stageSlice{},
		threads: map[[2]int64]string{}, procs: map[int64]string{}, threadName: threadName}
}
