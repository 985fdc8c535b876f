// Package spanschema is the span contract: the stage names and their order,
// the span names, the attribute keys and the shape of a request's trace. The
// span builder writes it, the exporters and tests read it; none of them
// spells a name of its own. It follows SGLang's own request tracing, so a
// query written for SGLang's traces works on specprobe's (docs/spans.md says
// where the two still differ and why).
package spanschema

import (
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Stage names, in the order a decode step runs them.
const (
	Draft       = "draft"
	Verify      = "verify"
	Accept      = "accept"
	DraftExtend = "draft_extend"
)

// Stages lists every stage a spec may describe, in step order.
var Stages = []string{Draft, Verify, Accept, DraftExtend}

// Order is a stage's place in a decode step; -1 for a name that is no stage.
func Order(stage string) int { return slices.Index(Stages, stage) }

// NewStep tells whether a call of stage next, begun on a thread whose
// previous call in the current step began stage last ("" when the step has
// none yet), begins the next decode step: a step runs its stages in order,
// so going back to an earlier stage is the next step.
func NewStep(last, next string) bool {
	l, n := Order(last), Order(next)
	return l >= 0 && n >= 0 && n < l
}

// RepeatBegins tells whether a top-level call of a batch stage next begins
// the next decode step though it goes back to no earlier stage: the step
// began with a call of that stage (first) and its latest top-level call
// did not raise. A batch stage serves its whole batch once a step, so a
// second call is the next step's (DFlash, whose one stage is its verify);
// a call after one that raised is the retry, in the same step.
func RepeatBegins(first, next string, batch, lastRaised bool) bool {
	return batch && first != "" && next == first && !lastRaised
}

// Span names besides the stage spans.
const (
	// DecodeForward spans a request's decode phase on one thread (as much of
	// it as was traced): one per request and thread.
	DecodeForward = "decode_forward"
	// DecodeLoop is one decode step of a request, under its decode_forward.
	DecodeLoop = "decode_loop"
)

const stagePrefix = "spec_"

// StageSpan names the span of a stage's call: spec_draft, spec_verify,
// spec_draft_extend. accept makes none (its values go on the verify).
func StageSpan(stage string) string { return stagePrefix + stage }

// StageOf reads a stage span's name back: spec_verify gives verify.
func StageOf(spanName string) (string, bool) {
	st, ok := strings.CutPrefix(spanName, stagePrefix)
	if !ok || Order(st) < 0 || st == Accept {
		return "", false
	}
	return st, true
}

// RootSpan names a request's root span as SGLang does, f"{role} Req
// {rid[:8]}": role is empty outside prefill/decode disaggregation, so the
// name starts with a space. rid[:8] counts characters, as Python slices.
func RootSpan(role, rid string) string {
	r := []rune(rid)
	return role + " Req " + string(r[:min(len(r), 8)])
}

// IsRootSpan recognises a request's root span from its name and attributes:
// the root style's key (every style's root has it), SGLang's module, or,
// without attributes, SGLang's name.
func IsRootSpan(name string, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		switch kv.Key {
		case KeyRootStyle:
			return true
		case KeyModule:
			return kv.Value.AsString() == ModuleRequest
		}
	}
	role, _, ok := strings.Cut(name, " Req ")
	return ok && !strings.Contains(role, " ")
}

// Attribute keys. Where OpenTelemetry's semantic conventions have a key it is
// theirs; the rest are SGLang's names, or specprobe's own (specprobe.*).
const (
	KeyRID    = attribute.Key("rid")    // every span of a request
	KeyModule = attribute.Key("module") // root span: ModuleRequest
	// ModuleRequest is the root's module, SGLang's value. It names the kind
	// of trace, not the engine (service.name does): one query finds the
	// requests of every engine specprobe traces.
	ModuleRequest = "sglang::request"

	KeyThreadID = semconv.ThreadIDKey                 // stage, decode_loop and decode_forward spans
	KeyStage    = attribute.Key("specprobe.stage")    // stage spans: draft, verify, draft_extend
	KeyDecodeCt = attribute.Key("decode_ct")          // decode_loop (and stage spans): the request's step number
	KeyCorrect  = attribute.Key("num_correct_drafts") // spec_verify: drafts accepted
	// KeyAcceptedTokens repeats num_correct_drafts under the name SGLang's
	// older releases used (kept by SGLang as a deprecated alias).
	KeyAcceptedTokens = attribute.Key("accepted_tokens")
	KeyDrafts         = attribute.Key("num_drafts") // drafts proposed or verified
	// KeySamplingRate is on every span of a sampled request: the fraction
	// of requests kept then (0.25: this request stands for four).
	KeySamplingRate = attribute.Key("specprobe.sampling.rate")
	// KeyCut is on a stage span closed without its exit: why it was cut
	// (exit_missed, events_dropped). Its status is an error.
	KeyCut = attribute.Key("specprobe.cut")

	// What a thread did in the CUDA driver (libcuda) during a stage span, or
	// on a decode_loop span outside its stages: seconds blocked in
	// synchronizing calls (double), how many such calls, kernel launches and
	// graph launches. Present only where the CUDA probes are armed.
	KeyCUDASyncDuration = attribute.Key("specprobe.cuda.sync.duration")
	KeyCUDASyncCount    = attribute.Key("specprobe.cuda.sync.count")
	KeyCUDALaunches     = attribute.Key("specprobe.cuda.launches")
	KeyCUDAGraphs       = attribute.Key("specprobe.cuda.graph_launches")

	// The thread span's attributes, SGLang's names.
	KeyHostID      = attribute.Key("host_id")
	KeyPID         = attribute.Key("pid") // the thread's kernel id, as SGLang records it
	KeyThreadLabel = attribute.Key("thread_label")
	KeyTPRank      = attribute.Key("tp_rank")
	KeyPPRank      = attribute.Key("pp_rank")
	KeyDPRank      = attribute.Key("dp_rank")

	// Resource attributes of the traced process.
	KeyServiceName    = semconv.ServiceNameKey // the spec's engine
	KeyProcessPID     = semconv.ProcessPIDKey
	KeyExecutableName = semconv.ProcessExecutableNameKey
	KeyCommandLine    = semconv.ProcessCommandLineKey
	KeyHostName       = semconv.HostNameKey
)

// RankKeys are the resource attributes the catalog's specs put a process's
// parallelism ranks under (match.ranks), engine by engine: SGLang's and
// vLLM's names for them.
var RankKeys = []attribute.Key{"sglang.tp_rank", "sglang.dp_rank", "sglang.pp_rank", "vllm.tp_rank", "vllm.dp_rank"}

// Value names a spec may read that the contract knows.
const (
	ValueCorrect = "num_correct_drafts"
	ValueDrafts  = "num_drafts"
)

// internalValues are read at a stage boundary for specprobe itself (where a
// watchpoint fired, the exception a call raised), never span attributes.
var internalValues = []string{"ip", "exception"}

// ValueAttrs is what a spec's named value becomes on its stage span:
// num_correct_drafts (with its alias) and num_drafts under their own names,
// any other name as specprobe.<name>.
func ValueAttrs(name string, v int64) []attribute.KeyValue { return AppendValueAttrs(nil, name, v) }

// AppendValueAttrs appends ValueAttrs(name, v) to dst.
func AppendValueAttrs(dst []attribute.KeyValue, name string, v int64) []attribute.KeyValue {
	switch {
	case name == ValueCorrect:
		return append(dst, KeyCorrect.Int64(v), KeyAcceptedTokens.Int64(v))
	case name == ValueDrafts:
		return append(dst, KeyDrafts.Int64(v))
	case slices.Contains(internalValues, name):
		return dst
	}
	return append(dst, attribute.Int64("specprobe."+name, v))
}

// NoRank marks a parallelism rank the process does not have.
const NoRank = -1

// Thread is the thread a request's stages ran on, as SGLang's thread span
// describes it.
type Thread struct {
	Label      string // "Scheduler" for SGLang's scheduler
	HostID     string // the machine id (/etc/machine-id), "unknown" without one
	TID        int
	TP, PP, DP int // ranks, NoRank when the process has none
}

// SpanName names the thread span as SGLang does:
// "Scheduler [TP 0] (host:1a2b3c4d | pid:4242)", each rank written with the
// spaces around it that SGLang gives it.
func (t Thread) SpanName() string {
	var b strings.Builder
	b.WriteString(t.Label)
	for _, r := range []struct {
		tag string
		n   int
	}{{"TP", t.TP}, {"PP", t.PP}, {"DP", t.DP}} {
		if r.n != NoRank {
			fmt.Fprintf(&b, " [%s %d] ", r.tag, r.n)
		}
	}
	host := []rune(t.HostID)
	fmt.Fprintf(&b, "(host:%s | pid:%d)", string(host[:min(len(host), 8)]), t.TID)
	return b.String()
}

// Attributes are the thread span's attributes.
func (t Thread) Attributes() []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, r := range []struct {
		key attribute.Key
		n   int
	}{{KeyTPRank, t.TP}, {KeyPPRank, t.PP}, {KeyDPRank, t.DP}} {
		if r.n != NoRank {
			out = append(out, r.key.Int(r.n))
		}
	}
	return append(out, KeyHostID.String(t.HostID), KeyPID.Int(t.TID), KeyThreadLabel.String(t.Label), KeyThreadID.Int(t.TID))
}
