package spanschema

import (
	"fmt"

	"go.opentelemetry.io/otel/attribute"
)

// RootStyle is how a request's root span is named and what identifies it,
// after the engine whose users read the trace: a spec's root: key (SGLang's
// when a spec does not say). Every style carries the full request id as rid,
// so two requests never share a root's identity, whatever its name shows.
type RootStyle string

const (
	// RootSGLang: " Req " + rid[:8] with module=sglang::request, as SGLang's
	// tracing names it (python/sglang/srt/tracing/trace.py,
	// f"{role} Req {rid[:8]}"), so SGLang's dashboards read it unchanged.
	RootSGLang RootStyle = "sglang"
	// RootVLLM: "llm_request" with gen_ai.request.id, the span vLLM's own
	// tracing makes per request (vllm/tracing.py's SpanAttributes; the
	// span in vllm/v1/engine/output_processor.py).
	RootVLLM RootStyle = "vllm"
	// RootLlamaCpp: "task " + id, as llama-server's logs name what a slot
	// serves (llama.cpp has no tracing of its own).
	RootLlamaCpp RootStyle = "llamacpp"
)

// RootStyles are the styles a spec may name.
var RootStyles = []RootStyle{RootSGLang, RootVLLM, RootLlamaCpp}

// ParseRootStyle reads a spec's root: value; "" is SGLang's.
func ParseRootStyle(s string) (RootStyle, error) {
	if s == "" {
		return RootSGLang, nil
	}
	for _, r := range RootStyles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("root %q: want one of %v", s, RootStyles)
}

// Attribute keys of root spans beyond rid and module.
const (
	// KeyRootStyle is on every request's root: which style named it, so a
	// query finds the roots of every engine by one key.
	KeyRootStyle = attribute.Key("specprobe.root")
	// KeyGenAIRequestID is vLLM's request id key (gen_ai.request.id).
	KeyGenAIRequestID = attribute.Key("gen_ai.request.id")
)

// Name is the root span's name for request rid; "" names it as SGLang does.
func (r RootStyle) Name(rid string) string {
	switch r {
	case RootVLLM:
		return "llm_request"
	case RootLlamaCpp:
		return "task " + rid
	}
	return RootSpan("", rid)
}

// Attrs are the root span's identifying attributes for request rid.
func (r RootStyle) Attrs(rid string) []attribute.KeyValue {
	if r == "" {
		r = RootSGLang
	}
	kvs := []attribute.KeyValue{KeyRID.String(rid), KeyRootStyle.String(string(r))}
	switch r {
	case RootVLLM:
		kvs = append(kvs, KeyGenAIRequestID.String(rid))
	case RootLlamaCpp:
	default:
		kvs = append(kvs, KeyModule.String(ModuleRequest))
	}
	return kvs
}
