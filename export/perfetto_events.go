package export

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// events lays out the whole trace: metadata first, then thread slices in
// time order, then each request's async slices as a contiguous block.
func (p *perfetto) events() []traceEvent {
	var evs []traceEvent
	for _, pid := range sortedKeys(p.procs) {
		name := cmp.Or(p.procs[pid], "specprobe")
		evs = append(evs, traceEvent{Name: "process_name", Ph: "M", Pid: pid,
			Args: map[string]any{"name": fmt.Sprintf("%s (pid %d)", name, pid)}})
	}
	threads := make([][2]int64, 0, len(p.threads))
	for t := range p.threads {
		threads = append(threads, t)
	}
	slices.SortFunc(threads, func(a, b [2]int64) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	for _, t := range threads {
		evs = append(evs, traceEvent{Name: "thread_name", Ph: "M", Pid: t[0], Tid: t[1],
			Args: map[string]any{"name": p.threads[t]}})
	}

	keys := slices.Clone(p.order)
	slices.SortStableFunc(keys, func(a, b sliceKey) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.tid, b.tid))
	})
	for _, k := range keys {
		sl := p.slices[k]
		args := map[string]any{"rids": sl.rids}
		if sl.rids == nil {
			args["rids"] = []string{}
		}
		if len(sl.correct) > 0 {
			args["num_correct_drafts"] = sl.correct
		}
		if sl.err != "" {
			args["error"] = sl.err
		}
		evs = append(evs, traceEvent{Name: strings.ToUpper(k.stage), Cat: "spec", Ph: "X",
			Ts: micros(k.start), Dur: micros(k.end - k.start), Pid: k.pid, Tid: k.tid, Args: args})
	}
	evs = append(evs, p.counterEvents()...)
	return append(evs, p.asyncEvents()...)
}

// asyncEvents emits b/e pairs per request in nesting order: each span's
// begin, its children's (in start order, the longer first on a tie), its
// end. Viewers sort events by timestamp with a stable sort, so emitting each
// request as one block in this order keeps ties (a decode_loop starting
// exactly when its decode_forward does, or ending when it ends) nested
// correctly, which a global sort by timestamp would not guarantee.
func (p *perfetto) asyncEvents() []traceEvent {
	byTrace := map[trace.TraceID][]asyncSpan{}
	var traces []trace.TraceID
	for _, a := range p.async {
		if _, ok := byTrace[a.trace]; !ok {
			traces = append(traces, a.trace)
		}
		byTrace[a.trace] = append(byTrace[a.trace], a)
	}
	first := func(t trace.TraceID) int64 { return slices.MinFunc(byTrace[t], byStart).start }
	slices.SortStableFunc(traces, func(a, b trace.TraceID) int { return cmp.Compare(first(a), first(b)) })

	var evs []traceEvent
	for _, t := range traces {
		group := byTrace[t]
		slices.SortStableFunc(group, func(a, b asyncSpan) int {
			return cmp.Or(byStart(a, b), cmp.Compare(b.end, a.end))
		})
		have := map[trace.SpanID]bool{}
		for _, a := range group {
			have[a.id] = true
		}
		children := map[trace.SpanID][]asyncSpan{}
		var tops []asyncSpan // spans whose parent is not drawn: the root, or orphans
		for _, a := range group {
			if a.parent.IsValid() && have[a.parent] && a.parent != a.id {
				children[a.parent] = append(children[a.parent], a)
			} else {
				tops = append(tops, a)
			}
		}
		id := "0x" + t.String()[:16]
		var emit func(a asyncSpan)
		emit = func(a asyncSpan) {
			evs = append(evs, asyncEvent(a, id, "b"))
			for _, c := range children[a.id] {
				emit(c)
			}
			evs = append(evs, asyncEvent(a, id, "e"))
		}
		for _, a := range tops {
			emit(a)
		}
	}
	return evs
}

func byStart(a, b asyncSpan) int { return cmp.Compare(a.start, b.start) }

func asyncEvent(a asyncSpan, id, ph string) traceEvent {
	e := traceEvent{Name: a.name, Cat: "request", Ph: ph, Pid: a.pid, ID: id}
	if ph == "b" {
		e.Ts = micros(a.start)
		e.Args = map[string]any{"rid": a.rid}
		if a.err != "" {
			e.Args["error"] = a.err
		}
	} else {
		e.Ts = micros(a.end)
	}
	return e
}

func sortedKeys[V any](m map[int64]V) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
