package export_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/specprobe/specprobe/export"
	"github.com/specprobe/specprobe/export/otlptest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestOTLPEndToEnd drives the real OTLP clients, configured only through
// the standard environment variables, into an in-process receiver.
func TestOTLPEndToEnd(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			rcv := &otlptest.Receiver{Protocol: proto}
			rcv.Start(t)
			rcv.SetEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5000")

			ctx := context.Background()
			exp, err := export.NewOTLP(ctx, "") // protocol from OTEL_EXPORTER_OTLP_PROTOCOL
			if err != nil {
				t.Fatal(err)
			}
			qp := export.NewQueueProcessor(exp, 64, 4, time.Hour, nil)
			tp := sdktrace.NewTracerProvider(sdktrace.WithResource(testResource()), sdktrace.WithSpanProcessor(qp))
			emitContract(tp)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				t.Fatal(err)
			}
			if exported, dropped, failed := qp.Stats(); exported != contractSpans || dropped != 0 || failed != 0 {
				t.Fatalf("stats exported %d dropped %d failed %d, want %d 0 0", exported, dropped, failed, contractSpans)
			}

			spans := rcv.Spans()
			if len(spans) != contractSpans {
				t.Fatalf("receiver got %d spans, want %d", len(spans), contractSpans)
			}
			if n := len(rcv.Requests()); n < 3 {
				t.Errorf("got %d requests, want batching of 4 to give at least 3", n)
			}
			byName := map[string]int{}
			for _, s := range spans {
				byName[s.GetName()]++
				if s.ResourceAttr("service.name") != "specprobe-test" || s.ResourceAttr("process.pid") != int64(4242) ||
					s.ResourceAttr("host.name") != "testhost" || s.ResourceAttr("process.executable.name") != "python3" {
					t.Errorf("resource = %v", s.Resource)
				}
				if s.Scope.GetName() != "specprobe/test" {
					t.Errorf("scope = %v", s.Scope)
				}
			}
			thread := "Scheduler [TP 0] (host:feedc0de | pid:101)"
			for name, n := range map[string]int{" Req aaaaaaaa": 1, " Req bbbbbbbb": 1, thread: 2, "decode_forward": 2,
				"decode_loop": 2, "spec_draft": 2, "spec_verify": 2, "spec_draft_extend": 2} {
				if byName[name] != n {
					t.Errorf("%d %q spans, want %d (all: %v)", byName[name], name, n, byName)
				}
			}

			// Parent links and contract attributes survive the wire.
			ids := map[string]otlptest.Span{}
			for _, s := range spans {
				ids[hex.EncodeToString(s.GetSpanId())] = s
			}
			for _, s := range spans {
				if s.GetName() != "spec_verify" {
					continue
				}
				// SGLang's nesting: root > thread span > decode_forward > stage.
				fwd := ids[hex.EncodeToString(s.GetParentSpanId())]
				th := ids[hex.EncodeToString(fwd.GetParentSpanId())]
				root := ids[hex.EncodeToString(th.GetParentSpanId())]
				if fwd.GetName() != "decode_forward" || th.GetName() != thread || th.Attr("thread_label") != "Scheduler" ||
					th.Attr("tp_rank") != int64(0) || th.Attr("pid") != int64(101) ||
					root.Attr("module") != "sglang::request" || root.Attr("rid") != s.Attr("rid") || len(root.GetParentSpanId()) != 0 {
					t.Errorf("verify %v: parent %q, its parent %q %v, root %v", s.Attr("rid"), fwd.GetName(), th.GetName(), th.GetAttributes(), root.GetAttributes())
				}
				want := map[any]int64{ridA: 3, ridB: 1}[s.Attr("rid")]
				if s.Attr("num_correct_drafts") != want || s.Attr("accepted_tokens") != want ||
					s.Attr("thread.id") != int64(102) || s.Attr("specprobe.stage") != "verify" {
					t.Errorf("verify attributes = %v", s.GetAttributes())
				}
				if s.GetStartTimeUnixNano() != uint64(at(3000).UnixNano()) {
					t.Errorf("verify start = %d", s.GetStartTimeUnixNano())
				}
			}
		})
	}
}

// A dead endpoint must cost the caller nothing: spans are counted as
// failed and Shutdown returns by its deadline.
func TestOTLPDeadEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // nothing listens on port 1
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	exp, err := export.NewOTLP(context.Background(), "http/protobuf")
	if err != nil {
		t.Fatal(err)
	}
	qp := export.NewQueueProcessor(exp, 16, 16, time.Hour, nil)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(qp))
	start := time.Now()
	endSpans(tp, 100)
	if d := time.Since(start); d > time.Second {
		t.Errorf("ending spans took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = tp.Shutdown(ctx)
	if exported, dropped, failed := qp.Stats(); exported != 0 || dropped+failed != 100 {
		t.Errorf("stats = %d %d %d", exported, dropped, failed)
	}
}

func TestResolveProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	if p := export.ResolveProtocol(""); p != "grpc" {
		t.Errorf("default = %q", p)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	if p := export.ResolveProtocol(""); p != "http/protobuf" {
		t.Errorf("generic env = %q", p)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
	if p := export.ResolveProtocol(""); p != "grpc" {
		t.Errorf("traces env = %q", p)
	}
	if p := export.ResolveProtocol("http/protobuf"); p != "http/protobuf" {
		t.Errorf("argument = %q", p)
	}
	if _, err := export.NewOTLP(context.Background(), "http/json"); err == nil {
		t.Error("http/json should be rejected")
	}
}
