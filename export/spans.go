package export

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/spanrec"
	"github.com/specprobe/specprobe/spanschema"
)

// stageInfo is what the Perfetto and console exporters need from a stage
// span; pulling it out once keeps them from holding whole ReadOnlySpans.
type stageInfo struct {
	stage      string // draft, verify or draft_extend
	rid        string
	tid        int64
	start, end int64 // unix nanos
	correct    int64
	hasCorrect bool
	err        string // non-empty iff status is Error
	isErr      bool
}

// stageOf reads the stage attribute, falling back to the span name so that
// spans from an older builder without specprobe.stage still show up.
func stageOf(s *spanrec.Span) (stageInfo, bool) {
	var si stageInfo
	for _, g := range s.Shared {
		if g != nil {
			si.read(g.KVs)
		}
	}
	si.read(s.Own)
	if si.stage == "" {
		st, ok := spanschema.StageOf(s.Name)
		if !ok {
			return si, false
		}
		si.stage = st
	}
	si.start, si.end = s.Start, s.End
	if s.Failed {
		si.isErr, si.err = true, s.Err
		if si.err == "" {
			si.err = "error"
		}
	}
	return si, true
}

func (si *stageInfo) read(kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		switch kv.Key {
		case spanschema.KeyStage:
			si.stage = kv.Value.AsString()
		case spanschema.KeyRID:
			si.rid = kv.Value.Emit()
		case spanschema.KeyThreadID:
			si.tid = intOf(kv.Value)
		case spanschema.KeyCorrect:
			si.correct, si.hasCorrect = intOf(kv.Value), true
		}
	}
}

// intOf tolerates the builder recording ids as strings or floats, which
// is easy to do by accident and would otherwise silently give tid 0.
func intOf(v attribute.Value) int64 {
	switch v.Type() {
	case attribute.INT64:
		return v.AsInt64()
	case attribute.FLOAT64:
		return int64(v.AsFloat64())
	case attribute.STRING:
		var n int64
		for _, c := range v.AsString() {
			if c < '0' || c > '9' {
				return 0
			}
			n = n*10 + int64(c-'0')
		}
		return n
	}
	return 0
}

func attrString(s *spanrec.Span, key attribute.Key) string {
	if v, ok := s.Attr(key); ok {
		return v.Emit()
	}
	return ""
}
