package spanschema_test

import (
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/specprobe/specprobe/spanschema"
)

func TestNewStep(t *testing.T) {
	for _, c := range []struct {
		last, next string
		want       bool
	}{
		{"", "draft", false}, // a thread's first call
		{"", "verify", false},
		{"draft", "draft", false}, // a second draft of the same step (per-request drafts)
		{"draft", "verify", false},
		{"verify", "accept", false},
		{"accept", "accept", false},
		{"accept", "draft_extend", false},
		{"verify", "draft", true}, // back to an earlier stage: the next step
		{"draft_extend", "draft", true},
		{"draft_extend", "verify", true},
		{"accept", "verify", true},
		{"verify", "bogus", false}, // not stages: never a boundary
		{"bogus", "draft", false},
	} {
		if got := spanschema.NewStep(c.last, c.next); got != c.want {
			t.Errorf("NewStep(%q, %q) = %v, want %v", c.last, c.next, got, c.want)
		}
	}
}

func TestRepeatBegins(t *testing.T) {
	for _, c := range []struct {
		first, next       string
		batch, lastRaised bool
		want              bool
	}{
		{"verify", "verify", true, false, true}, // DFlash: each verify its own step
		{"verify", "verify", true, true, false}, // the retry of a verify that raised
		{"draft", "draft", false, false, false}, // per-request drafts of one step
		{"draft", "verify", true, false, false}, // not the step's first stage
		{"", "verify", true, false, false},      // a step's first call
		{"draft", "draft", true, false, true},   // a batch draft again: the next step
	} {
		if got := spanschema.RepeatBegins(c.first, c.next, c.batch, c.lastRaised); got != c.want {
			t.Errorf("RepeatBegins(%q, %q, batch %v, raised %v) = %v, want %v", c.first, c.next, c.batch, c.lastRaised, got, c.want)
		}
	}
}

func TestStageNames(t *testing.T) {
	for _, c := range []struct {
		stage, span string
	}{{"draft", "spec_draft"}, {"verify", "spec_verify"}, {"draft_extend", "spec_draft_extend"}} {
		if got := spanschema.StageSpan(c.stage); got != c.span {
			t.Errorf("StageSpan(%q) = %q, want %q", c.stage, got, c.span)
		}
		if got, ok := spanschema.StageOf(c.span); !ok || got != c.stage {
			t.Errorf("StageOf(%q) = %q, %v", c.span, got, ok)
		}
	}
	for _, name := range []string{"spec_accept", "spec_bogus", "decode_forward", "draft", ""} {
		if st, ok := spanschema.StageOf(name); ok {
			t.Errorf("StageOf(%q) = %q: not a stage span", name, st)
		}
	}
	if got := spanschema.Order("draft_extend"); got != 3 {
		t.Errorf("Order(draft_extend) = %d", got)
	}
}

func TestRootSpan(t *testing.T) {
	for _, c := range []struct {
		role, rid, want string
	}{
		{"", "0123456789abcdef", " Req 01234567"}, // SGLang's unified mode: empty role, leading space
		{"decode", "0123456789abcdef", "decode Req 01234567"},
		{"", "ab", " Req ab"},
		{"", "", " Req "},
		{"", "żółćżółćżółć", " Req żółćżółć"}, // characters, as Python slices, not bytes
	} {
		got := spanschema.RootSpan(c.role, c.rid)
		if got != c.want {
			t.Errorf("RootSpan(%q, %q) = %q, want %q", c.role, c.rid, got, c.want)
		}
		if !spanschema.IsRootSpan(got, nil) {
			t.Errorf("IsRootSpan(%q) = false", got)
		}
	}
	module := []attribute.KeyValue{spanschema.KeyModule.String(spanschema.ModuleRequest)}
	for _, c := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  bool
	}{
		{"anything", module, true},
		{" Req x", []attribute.KeyValue{spanschema.KeyModule.String("sglang::other")}, false},
		{"decode_forward", nil, false},
		{"spec_verify", nil, false},
		{"two words Req x", nil, false},
	} {
		if got := spanschema.IsRootSpan(c.name, c.attrs); got != c.want {
			t.Errorf("IsRootSpan(%q, %v) = %v, want %v", c.name, c.attrs, got, c.want)
		}
	}
}

func TestThreadSpan(t *testing.T) {
	no := spanschema.NoRank
	for _, c := range []struct {
		th   spanschema.Thread
		name string
		keys []attribute.Key
	}{
		{spanschema.Thread{Label: "Scheduler", HostID: "1a2b3c4d5e6f", TID: 4242, TP: 0, PP: no, DP: no},
			"Scheduler [TP 0] (host:1a2b3c4d | pid:4242)", []attribute.Key{"tp_rank", "host_id", "pid", "thread_label", "thread.id"}},
		// SGLang writes each rank with a space on both sides: two between ranks.
		{spanschema.Thread{Label: "Scheduler", HostID: "1a2b3c4d5e6f", TID: 7, TP: 1, PP: no, DP: 2},
			"Scheduler [TP 1]  [DP 2] (host:1a2b3c4d | pid:7)", []attribute.Key{"tp_rank", "dp_rank", "host_id", "pid", "thread_label", "thread.id"}},
		{spanschema.Thread{Label: "llama-server", HostID: "unknown", TID: 9, TP: no, PP: no, DP: no},
			"llama-server(host:unknown | pid:9)", []attribute.Key{"host_id", "pid", "thread_label", "thread.id"}},
		{spanschema.Thread{Label: "S", HostID: "h", TID: 1, TP: 0, PP: 3, DP: 0},
			"S [TP 0]  [PP 3]  [DP 0] (host:h | pid:1)", []attribute.Key{"tp_rank", "pp_rank", "dp_rank", "host_id", "pid", "thread_label", "thread.id"}},
	} {
		if got := c.th.SpanName(); got != c.name {
			t.Errorf("SpanName() = %q, want %q", got, c.name)
		}
		attrs := c.th.Attributes()
		if len(attrs) != len(c.keys) {
			t.Errorf("%s: attributes %v, want keys %v", c.name, attrs, c.keys)
			continue
		}
		for i, k := range c.keys {
			if attrs[i].Key != k {
				t.Errorf("%s: attribute %d is %s, want %s", c.name, i, attrs[i].Key, k)
			}
		}
	}
	th := spanschema.Thread{Label: "Scheduler", HostID: "abc", TID: 5, TP: 0, PP: no, DP: no}
	want := map[attribute.Key]attribute.Value{"tp_rank": attribute.IntValue(0), "host_id": attribute.StringValue("abc"),
		"pid": attribute.IntValue(5), "thread_label": attribute.StringValue("Scheduler"), "thread.id": attribute.IntValue(5)}
	for _, kv := range th.Attributes() {
		if want[kv.Key] != kv.Value {
			t.Errorf("%s = %v, want %v", kv.Key, kv.Value.Emit(), want[kv.Key].Emit())
		}
	}
}

func TestValueAttrs(t *testing.T) {
	for _, c := range []struct {
		name string
		want []attribute.KeyValue
	}{
		{"num_correct_drafts", []attribute.KeyValue{attribute.Int64("num_correct_drafts", 3), attribute.Int64("accepted_tokens", 3)}},
		{"num_drafts", []attribute.KeyValue{attribute.Int64("num_drafts", 3)}},
		{"slot_id", []attribute.KeyValue{attribute.Int64("specprobe.slot_id", 3)}},
		{"ip", nil},
		{"exception", nil},
	} {
		got := spanschema.ValueAttrs(c.name, 3)
		if len(got) != len(c.want) {
			t.Errorf("ValueAttrs(%q) = %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("ValueAttrs(%q)[%d] = %v, want %v", c.name, i, got[i], c.want[i])
			}
		}
	}
}

// The keys OpenTelemetry defines must keep their spelling whatever semconv
// version the package takes them from: dashboards query these strings.
func TestSemconvKeys(t *testing.T) {
	for k, want := range map[attribute.Key]string{
		spanschema.KeyThreadID: "thread.id", spanschema.KeyServiceName: "service.name",
		spanschema.KeyProcessPID: "process.pid", spanschema.KeyExecutableName: "process.executable.name",
		spanschema.KeyCommandLine: "process.command_line", spanschema.KeyHostName: "host.name",
	} {
		if string(k) != want {
			t.Errorf("key %q, want %q", k, want)
		}
	}
}

// Each engine's root as its users know it, and what identifies it: the
// full id always, so two vLLM requests whose ids share 8 characters (every
// "cmpl-…" id does) never share a root identity.
func TestRootStyles(t *testing.T) {
	const rid = "cmpl-89f3a1c2d4e5"
	for _, c := range []struct {
		style spanschema.RootStyle
		name  string
		attrs map[attribute.Key]string
	}{
		{"", " Req cmpl-89f", map[attribute.Key]string{"rid": rid, "module": "sglang::request", "specprobe.root": "sglang"}},
		{spanschema.RootSGLang, " Req cmpl-89f", map[attribute.Key]string{"rid": rid, "module": "sglang::request", "specprobe.root": "sglang"}},
		{spanschema.RootVLLM, "llm_request", map[attribute.Key]string{"rid": rid, "gen_ai.request.id": rid, "specprobe.root": "vllm"}},
		{spanschema.RootLlamaCpp, "task " + rid, map[attribute.Key]string{"rid": rid, "specprobe.root": "llamacpp"}},
	} {
		if got := c.style.Name(rid); got != c.name {
			t.Errorf("%q: name %q, want %q", c.style, got, c.name)
		}
		attrs := c.style.Attrs(rid)
		got := map[attribute.Key]string{}
		for _, kv := range attrs {
			got[kv.Key] = kv.Value.AsString()
		}
		if !reflect.DeepEqual(got, c.attrs) {
			t.Errorf("%q: attributes %v, want %v", c.style, got, c.attrs)
		}
		if !spanschema.IsRootSpan(c.name, attrs) {
			t.Errorf("%q: IsRootSpan does not know its root", c.style)
		}
	}
	for _, s := range []string{"", "sglang", "vllm", "llamacpp"} {
		if _, err := spanschema.ParseRootStyle(s); err != nil {
			t.Errorf("ParseRootStyle(%q): %v", s, err)
		}
	}
	if _, err := spanschema.ParseRootStyle("otel"); err == nil || !strings.Contains(err.Error(), "vllm") {
		t.Errorf("an unknown style: %v, want an error listing the styles", err)
	}
}
