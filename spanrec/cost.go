package spanrec

import (
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
)

// Cost is what a span held in a queue keeps in memory, in bytes, as
// queues bound themselves by (export.Budget): the record, its own
// attributes and their strings, and SpanOverhead for what it shares and
// pins. It is an estimate that errs high; TestSpanCostCoversHeap in
// spanbuilder measures the heap spans the span builder makes really take
// and checks that Cost covers it.
func (s *Span) Cost() int64 {
	n := SpanOverhead + int64(len(s.Name)+len(s.Err)) + int64(len(s.Own))*kvBytes
	for _, kv := range s.Own {
		n += int64(len(kv.Key))
		switch kv.Value.Type() {
		case attribute.STRING:
			n += int64(len(kv.Value.AsString()))
		case attribute.STRINGSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.BOOLSLICE:
			n += int64(len(kv.Value.Emit())) // an upper bound of the slice's bytes, and rare
		}
	}
	return n
}

// SpanOverhead is a queued span's cost beyond its own attributes: the
// record itself (152 bytes), and its share of what a queued span keeps
// alive with others: the chunks it and its attributes were carved from
// (256 spans, 512 attributes, where the spans of steps no queue took stay
// too), its request's and thread's shared attribute groups and, for the
// spans that end a request, the request's own state. Measured
// (TestSpanCostCoversHeap): 309 bytes of heap a span when a queue keeps
// every step (Cost says 659), 502 with four GPU attributes on each stage
// span (894), 451-591 when it keeps runs of 128 or 32 steps and sheds as
// many (659).
const SpanOverhead = 512

var kvBytes = int64(unsafe.Sizeof(attribute.KeyValue{}))
