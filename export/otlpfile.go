package export

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/specprobe/specprobe/spanrec"
)

// idKeys are the only bytes fields OTLP/JSON writes as hex; every other
// bytes field (e.g. a bytesValue attribute) stays base64 as protojson emits
// it. A key cannot be matched inside a string value: there every '"' is
// escaped, so a name like traceId is never directly followed by a quote.
var idKeys = [][]byte{[]byte(`"traceId":"`), []byte(`"spanId":"`), []byte(`"parentSpanId":"`)}

// MarshalOTLPJSON encodes req the way the OpenTelemetry Collector's file
// exporter does: protojson with integer enums, then ids re-encoded as hex.
// The result is a single line without a trailing newline. The otlp-file
// exporter writes the same bytes straight from its records; this is the
// reference it is tested against.
func MarshalOTLPJSON(req *collectortrace.ExportTraceServiceRequest) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(req)
	if err != nil {
		return nil, err
	}
	return rewriteIDs(raw, func(s string) (string, error) {
		b, err := base64.StdEncoding.DecodeString(s)
		return hex.EncodeToString(b), err
	})
}

// UnmarshalOTLPJSON is the inverse of MarshalOTLPJSON; it also accepts any
// other OTLP/JSON producer's line, e.g. one written by the Collector.
func UnmarshalOTLPJSON(line []byte) (*collectortrace.ExportTraceServiceRequest, error) {
	raw, err := rewriteIDs(line, func(s string) (string, error) {
		b, err := hex.DecodeString(s)
		return base64.StdEncoding.EncodeToString(b), err
	})
	if err != nil {
		return nil, err
	}
	req := &collectortrace.ExportTraceServiceRequest{}
	return req, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(raw, req)
}

// rewriteIDs compacts first: protojson deliberately varies its whitespace
// between builds, and compact output is what makes the id pattern exact
// and keeps each request on one line. Field order stays protojson's
// (proto declaration order), as in Collector output.
func rewriteIDs(raw []byte, conv func(string) (string, error)) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	in := buf.Bytes()
	out := make([]byte, 0, len(in))
	// Next position of each key in in, or -1; found again only once passed.
	next := make([]int, len(idKeys))
	for k, key := range idKeys {
		next[k] = bytes.Index(in, key)
	}
	done := 0
	for {
		k := -1
		for i, p := range next {
			if p >= 0 && (k < 0 || p < next[k]) {
				k = i
			}
		}
		if k < 0 {
			return append(out, in[done:]...), nil
		}
		start := next[k] + len(idKeys[k])
		end := bytes.IndexByte(in[start:], '"')
		if end < 0 {
			return nil, fmt.Errorf("otlp json %s: unterminated string", idKeys[k])
		}
		v, err := conv(string(in[start : start+end]))
		if err != nil {
			return nil, fmt.Errorf("otlp json %s%s\": %w", idKeys[k], in[start:start+end], err)
		}
		out = append(append(out, in[done:start]...), v...)
		done = start + end
		if p := bytes.Index(in[done:], idKeys[k]); p >= 0 {
			next[k] = done + p
		} else {
			next[k] = -1
		}
	}
}

type otlpFile struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
	buf    []byte
}

// NewOTLPFile writes one OTLP/JSON ExportTraceServiceRequest per batch,
// one per line, streamed from the records (spanrec.AppendJSON), so the
// file can be replayed into a Collector (otlpjsonfile receiver) or read back
// with UnmarshalOTLPJSON. w is never closed: it is often os.Stdout, and
// the caller owns it.
func NewOTLPFile(w io.Writer) Exporter { return &otlpFile{w: w} }

func (e *otlpFile) Export(ctx context.Context, spans []*spanrec.Span) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errShutdown
	}
	e.buf = append(spanrec.AppendJSON(e.buf[:0], spans), '\n')
	// A single Write per line keeps lines whole even if w is shared.
	_, err := e.w.Write(e.buf)
	if cap(e.buf) > 4<<20 {
		e.buf = nil // one huge batch does not keep its buffer
	}
	return err
}

func (e *otlpFile) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}
