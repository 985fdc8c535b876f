package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/tracer"
)

func catalogSpec(t *testing.T, engine string) *probes.Spec {
	t.Helper()
	s, err := probes.Lookup(engine)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// editedLlamaSpec is the catalog's llamacpp spec with its text edited: each
// pair of edits replaces the first with the second, which must be there.
func editedLlamaSpec(t *testing.T, edits ...string) *probes.Spec {
	t.Helper()
	src, err := probes.CatalogSource("llamacpp")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(text, edits[i]) {
			t.Fatalf("the llamacpp spec has no %q to edit", edits[i])
		}
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	s, err := probes.Parse("edited-llamacpp.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const llamaDWARFLine = "  dwarf: [libllama-server-impl.so, llama-server]\n"

// TestLlamaServerOffsets: on a real llama-server, the offsets come from its
// DWARF when it has it (even where the spec's release table is wrong), and
// offsets that read the wrong fields are refused at the first call instead
// of exporting wrong ids.
func TestLlamaServerOffsets(t *testing.T) {
	servers, models := needLlama(t)
	server := servers[0]
	newest := catalogSpec(t, "llamacpp").Fields.Releases[0]

	t.Run("DWARF over a wrong release table", func(t *testing.T) {
		// The table says task is at 232 (b10173's layout); the binary's
		// DWARF says where it is, and the traced ids match the server's log.
		spec := editedLlamaSpec(t, "server_slot.task: 240", "server_slot.task: 232")
		p := startLlama(t, server, models)
		checks, err := loader.CheckNative(p.cmd.Process.Pid, spec, true)
		if err != nil || len(checks) == 0 || checks[0].Err != nil {
			t.Fatalf("CheckNative: %v %v", checks, err)
		}
		l := checks[0].Target.Layout
		for _, src := range l.Sources {
			if !src.DWARF {
				t.Skipf("%s has no DWARF for %s (%s): build it with -g to test this", server, src.Field, src)
			}
			// The newest release's offsets were compiled from b10573's
			// source; the build tested is of the same layout.
			if src.Offset != newest.Offsets[src.Field] {
				t.Errorf("%s: DWARF offset %d, the compiled layout's %d", src.Field, src.Offset, newest.Offsets[src.Field])
			}
			if (src.Field == "server_slot.task") != (src.Differs != nil) {
				t.Errorf("%s: differs from the table = %v", src, src.Differs)
			}
		}
		t.Logf("layout: %s", strings.Join(l.Describe(), "; "))
		_ = p.cmd.Process.Kill()
		testLlamaServer(t, server, models, spec)
	})

	refused := []struct {
		name  string
		edits []string
		want  []string
	}{
		// server_slot.id at 8 reads half of the ctx_tgt pointer.
		{"slot id read from a pointer", []string{llamaDWARFLine, "", "server_slot.id: 0", "server_slot.id: 8"},
			// below 0 or not below 2 (-np 2), as the pointer's half falls
			[]string{"stage accept: slot_id read ", ", at entry from arg3 (deref [-104 = server_slot.id-server_slot.spec_i_batch])",
				"server_slot.id = 8 (release b10217"}},
		// server_task.id at 8 reads task.index, 0 for every request.
		{"task id read from task.index", []string{llamaDWARFLine, "", "server_task.id: 0", "server_task.id: 8"},
			[]string{"stage accept: request_id read 0, read on slot_id ", "one request on two", "deref [128 = server_slot.task-server_slot.spec_i_batch, 8 = server_task.id]",
				"server_task.id = 8 (release b10217"}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			spec := editedLlamaSpec(t, tc.edits...)
			p := startLlama(t, server, models)
			mem := tracetest.NewInMemoryExporter()
			attached := make(chan struct{})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sent := make(chan []llamaResponse, 1)
			go func() {
				select {
				case <-attached:
					sent <- p.complete(t)
				case <-ctx.Done():
					sent <- nil
				}
			}()
			res, err := tracer.Run(ctx, tracer.Config{PID: p.cmd.Process.Pid, Spec: spec, SkipEndbr: true, Log: testLog{t},
				Attached: attached, Exporters: []tracer.Exporter{{Name: "memory", SpanExporter: keepSpans{mem}}}})
			// The requests are served in full: the server never noticed.
			if r := <-sent; len(r) != 2 {
				t.Errorf("%d responses, want 2", len(r))
			}
			var ce *tracer.CheckError
			if !errors.As(err, &ce) {
				t.Fatalf("tracer.Run: %v (%+v), want a CheckError", err, res)
			}
			for _, w := range tc.want {
				if !strings.Contains(ce.Msg, w) {
					t.Errorf("error %q does not say %q", ce.Msg, w)
				}
			}
			// Refused at the first accept: no span names a request.
			for _, s := range mem.GetSpans().Snapshots() {
				if rid := attrs(s)["rid"].AsString(); rid != "" {
					t.Errorf("span %s exported with rid %q", s.Name(), rid)
				}
			}
			if p.cmd.ProcessState != nil {
				t.Errorf("llama-server exited")
			}
			assertNoProbesLeft(t)
		})
	}
}
