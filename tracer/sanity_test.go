package tracer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
)

// The catalog's llama.cpp accept stage, resolved with its newest release's
// offsets, as site 1 (site 0 a stage without checks).
func llamaChecks(t *testing.T, cmdline []string, env map[string]string) *valueChecks {
	t.Helper()
	spec, err := probes.Lookup("llamacpp")
	if err != nil {
		t.Fatal(err)
	}
	rel := spec.Fields.Releases[0]
	layout := &loader.Layout{Offsets: rel.Offsets, Release: rel}
	for _, n := range spec.Fields.Names() {
		layout.Sources = append(layout.Sources, loader.FieldSource{Field: n, Offset: rel.Offsets[n], From: "release " + rel.Name})
	}
	acc, err := loader.ResolvedStage(spec.Stages[probes.Accept], layout)
	if err != nil {
		t.Fatal(err)
	}
	targets := []loader.Target{{Stage: spec.Stages[probes.Verify]}, {Stage: acc, Layout: layout}}
	return newValueChecks(targets, cmdline, func(name string) string {
		if v, ok := env[name]; ok {
			return name + "=" + v
		}
		return ""
	})
}

// accept is an accept entry of task on slot.
func accept(task string, slot int64) *spanbuilder.Event {
	ev := &spanbuilder.Event{Site: 1, RequestID: task}
	ev.Values[0] = spanbuilder.Value{Name: "num_drafts", V: 4}
	ev.Values[1] = spanbuilder.Value{Name: "slot_id", V: slot}
	ev.NValues = 2
	return ev
}

func TestValueChecks(t *testing.T) {
	type call struct {
		task string
		slot int64
	}
	np2 := []string{"llama-server", "-np", "2"}
	tests := []struct {
		name    string
		cmdline []string
		env     map[string]string
		calls   []call
		err     string // of the last call; the others pass
	}{
		{"two slots interleaved", np2, nil, []call{{"29", 0}, {"28", 1}, {"29", 0}, {"28", 1}, {"31", 1}, {"30", 0}}, ""},
		{"a request id not read", np2, nil, []call{{"5", 0}, {"", 0}, {"5", 0}}, ""},
		{"slot past -np", np2, nil, []call{{"1", 0}, {"2", 2}},
			"stage accept: slot_id read 2, not below 2 (-np 2), at entry from arg3 (deref [-112 = server_slot.id-server_slot.spec_i_batch]): the offsets do not fit this build; tracing stopped rather than export wrong ids; offsets: server_slot.id = 0 (release b10217 (ddd4ec142) to b10573 (d775b8967) and 3f545becc); server_slot.spec_i_batch = 112 (release b10217 (ddd4ec142) to b10573 (d775b8967) and 3f545becc)"},
		{"slot a pointer's half", np2, nil, []call{{"1", 21845}}, "slot_id read 21845, not below 2 (-np 2)"},
		{"negative slot", np2, nil, []call{{"1", -1}}, "slot_id read -1, below 0"},
		{"auto: 4 slots", []string{"llama-server"}, nil, []call{{"1", 3}, {"2", 4}}, "slot_id read 4, not below 4 (the default 4 (no -np or --parallel or LLAMA_ARG_N_PARALLEL given))"},
		{"slots from the environment", []string{"llama-server"}, map[string]string{"LLAMA_ARG_N_PARALLEL": "8"}, []call{{"1", 7}}, ""},
		{"task id goes back on its slot", np2, nil, []call{{"10", 0}, {"12", 0}, {"11", 0}},
			"stage accept: request_id read 11, less than the 12 read before on slot_id 0: ids go back, at entry from arg3 (deref [128 = server_slot.task-server_slot.spec_i_batch, 0 = server_task.id])"},
		{"one task on two slots", np2, nil, []call{{"0", 0}, {"0", 1}}, "request_id read 0, read on slot_id 1 and before on slot_id 0: one request on two"},
		{"negative task", np2, nil, []call{{"-7", 0}}, "request_id read -7, below 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := llamaChecks(t, tc.cmdline, tc.env)
			for i, cl := range tc.calls {
				err := c.check(accept(cl.task, cl.slot))
				last := i == len(tc.calls)-1
				switch {
				case !last || tc.err == "":
					if err != nil {
						t.Fatalf("call %d (%s on %d): %v", i, cl.task, cl.slot, err)
					}
				case err == nil || !strings.Contains(err.Error(), tc.err):
					t.Fatalf("call %d: %v, want an error saying %q", i, err, tc.err)
				}
			}
		})
	}
	// Sites without checks pass whatever they read.
	c := llamaChecks(t, np2, nil)
	if err := c.check(&spanbuilder.Event{Site: 0, RequestID: "-1"}); err != nil {
		t.Errorf("verify: %v", err)
	}
	if newValueChecks([]loader.Target{{Stage: &probes.Stage{Name: "verify"}}}, nil, nil) != nil {
		t.Errorf("checks made for a spec without any")
	}
}

func TestCheckedAddHoldsTheFirstEvents(t *testing.T) {
	np2 := []string{"llama-server", "-np", "2"}
	var got []string
	add := func(ev *spanbuilder.Event) { got = append(got, ev.RequestID) }

	// Task id 0 on slot 0 looks fine alone; on slot 1 too it is refused,
	// and nothing held is handed on.
	c := newCheckedAdd(llamaChecks(t, np2, nil), add, newRefusal(), true)
	c.event(accept("0", 0))
	c.event(accept("0", 1))
	if c.r.err == nil || len(got) != 0 {
		t.Fatalf("refusal: err %v, handed on %v", c.r.err, got)
	}
	select {
	case <-c.r.ch:
	default:
		t.Errorf("refused not closed")
	}
	c.event(accept("1", 0))
	c.release()
	if len(got) != 0 {
		t.Errorf("handed on after the refusal: %v", got)
	}

	// Believed after probationCalls checked calls: all handed on, in order.
	got = nil
	c = newCheckedAdd(llamaChecks(t, np2, nil), add, newRefusal(), true)
	for i := range probationCalls - 1 {
		c.event(accept(fmt.Sprint(i/2*2+i%2), int64(i%2)))
	}
	c.event(&spanbuilder.Event{Site: 0}) // a verify: no checks, held in order
	if len(got) != 0 {
		t.Fatalf("handed on during probation: %v", got)
	}
	c.event(accept("99", 0)) // the last call of the probation
	if len(got) != probationCalls+1 || got[0] != "0" || got[1] != "1" || got[probationCalls-1] != "" || got[probationCalls] != "99" {
		t.Errorf("after probation: %v", got)
	}

	// A seldom-called stage: what is held goes on once probationTime passed.
	got = nil
	c = newCheckedAdd(llamaChecks(t, np2, nil), add, newRefusal(), true)
	c.event(accept("3", 0))
	c.tick(c.since.Add(probationTime / 2))
	if len(got) != 0 {
		t.Errorf("handed on before probationTime: %v", got)
	}
	c.tick(c.since.Add(probationTime))
	if len(got) != 1 {
		t.Errorf("not handed on after probationTime: %v", got)
	}

	// No checks in the spec: nothing held.
	got = nil
	c = newCheckedAdd(nil, add, newRefusal(), true)
	c.event(&spanbuilder.Event{RequestID: "x"})
	if len(got) != 1 {
		t.Errorf("held without checks: %v", got)
	}
}

// A session of several processes checks each without holding, and one
// refusal stops them all.
func TestCheckedAddSeveralProcesses(t *testing.T) {
	np2 := []string{"llama-server", "-np", "2"}
	var got []string
	add := func(ev *spanbuilder.Event) { got = append(got, ev.RequestID) }
	r := newRefusal()
	a := newCheckedAdd(llamaChecks(t, np2, nil), add, r, false)
	b := newCheckedAdd(llamaChecks(t, np2, nil), add, r, false)
	a.event(accept("1", 0))
	if len(got) != 1 {
		t.Fatalf("not handed on at once: %v", got)
	}
	b.event(accept("2", 5))
	a.event(accept("1", 0))
	if r.err == nil || len(got) != 1 {
		t.Errorf("after b's refusal: err %v, handed on %v", r.err, got)
	}
}
