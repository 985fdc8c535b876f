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

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// idFields are the only bytes fields OTLP/JSON writes as hex; every other
// bytes field (e.g. a bytesValue attribute) stays base64 as protojson emits.
var idFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// MarshalOTLPJSON encodes req the way the OpenTelemetry Collector's file
// exporter does: protojson with integer enums, then ids re-encoded as hex.
// The result is a single line without a trailing newline.
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

// rewriteIDs goes through a generic JSON tree rather than patching bytes so
// that it only ever touches object keys, never attribute values that happen
// to look like ids. Re-encoding also strips protojson's deliberately
// unstable whitespace, keeping each request on one line.
func rewriteIDs(raw []byte, conv func(string) (string, error)) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep int64/double text exactly as protojson wrote it
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	if err := walkIDs(tree, conv); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func walkIDs(n any, conv func(string) (string, error)) error {
	switch v := n.(type) {
	case map[string]any:
		for k, child := range v {
			if s, ok := child.(string); ok && idFields[k] {
				out, err := conv(s)
				if err != nil {
					return fmt.Errorf("otlp json %s %q: %w", k, s, err)
				}
				v[k] = out
				continue
			}
			if err := walkIDs(child, conv); err != nil {
				return err
			}
		}
	case []any:
		for _, child := range v {
			if err := walkIDs(child, conv); err != nil {
				return err
			}
		}
	}
	return nil
}

type otlpFile struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

// NewOTLPFile writes one OTLP/JSON ExportTraceServiceRequest per
// ExportSpans call, one per line, so the file can be replayed into a
// Collector (otlpjsonfile receiver) or read back with UnmarshalOTLPJSON.
// w is never closed: it is often os.Stdout, and the caller owns it.
func NewOTLPFile(w io.Writer) sdktrace.SpanExporter { return &otlpFile{w: w} }

func (e *otlpFile) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	line, err := MarshalOTLPJSON(&collectortrace.ExportTraceServiceRequest{ResourceSpans: ResourceSpans(spans)})
	if err != nil {
		return err
	}
	line = append(line, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errShutdown
	}
	// A single Write per line keeps lines whole even if w is shared.
	_, err = e.w.Write(line)
	return err
}

func (e *otlpFile) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}
