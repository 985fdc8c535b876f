package probes_test

import (
	"strings"
	"testing"

	"github.com/specprobe/specprobe/probes"
)

// fieldsSpec is a native spec whose accept reads through named fields.
const fieldsSpec = `engine: e
fields:
  dwarf: [libserver.so]
  build: {binary: [libcommon.so], symbol: BUILD}
  releases:
    - {name: new, since: 200, offsets: {slot.id: 0, slot.batch: 112, slot.task: 240, task.id: 0}}
    - {name: old, since: 100, offsets: {slot.id: 0, slot.batch: 96, slot.task: 216, task.id: 0}}
stages:
  verify: {binary: b, symbol: v, scope: batch}
  accept:
    binary: b
    symbol: a
    request_id: {at: entry, from: arg3, deref: [slot.task - slot.batch, task.id], type: int, size: 4, check: {min: 0, increasing_per: slot_id}}
    values:
      slot_id: {at: entry, from: arg3, deref: [-slot.batch + slot.id, 8], type: int, size: 4, check: {min: 0, below: {flag: [-np, --parallel], env: N_SLOTS, default: 4}}}
`

func TestParseFields(t *testing.T) {
	s := parse(t, fieldsSpec)
	if s.Fields == nil || len(s.Fields.Releases) != 2 || s.Fields.Build.Symbol != "BUILD" || s.Fields.DWARF[0] != "libserver.so" {
		t.Fatalf("fields = %+v", s.Fields)
	}
	if got := strings.Join(s.Fields.Names(), ","); got != "slot.batch,slot.id,slot.task,task.id" {
		t.Errorf("names = %s", got)
	}
	acc := s.Stages[probes.Accept]
	rid := acc.RequestID
	if len(rid.DerefExpr) != 2 || rid.DerefExpr[0].String() != "slot.task-slot.batch" || rid.DerefExpr[1].String() != "task.id" {
		t.Errorf("request_id deref = %v", rid.DerefExpr)
	}
	new := s.Fields.Releases[0].Offsets
	for i, want := range []int64{128, 0} {
		if got, _, ok := rid.DerefExpr[i].Eval(new); !ok || got != want {
			t.Errorf("request_id deref[%d] = %d, want %d", i, got, want)
		}
	}
	slot := acc.Values["slot_id"]
	// A plain integer beside a field: nil expression, the integer in Deref.
	if slot.DerefExpr[1] != nil || slot.Deref[1] != 8 {
		t.Errorf("slot_id deref[1] = %v / %d", slot.DerefExpr[1], slot.Deref[1])
	}
	if got, _, _ := slot.DerefExpr[0].Eval(s.Fields.Releases[1].Offsets); got != -96 {
		t.Errorf("slot_id deref[0] on old = %d, want -96", got)
	}
	if rid.Check.IncreasingPer != "slot_id" || *rid.Check.Min != 0 || slot.Check.Below.Default != 4 || slot.Check.Below.Env != "N_SLOTS" {
		t.Errorf("checks: %+v %+v", rid.Check, slot.Check)
	}
}

func TestParseFieldErrors(t *testing.T) {
	base := func(old, new string) string { return strings.Replace(fieldsSpec, old, new, 1) }
	tests := []struct{ name, src, want string }{
		{"unknown field", base("task.id]", "task.idx]"), "deref names field task.idx, which no fields.releases entry gives an offset for (have: slot.batch, slot.id, slot.task, task.id)"},
		{"not a field", base("task.id]", "task]"), `"task" is neither an integer nor a field (struct.member)`},
		{"bad operator", base("slot.task - slot.batch", "slot.task * slot.batch"), "expected fields and integers joined by + or -"},
		{"two terms without an operator", base("slot.task - slot.batch", "slot.task slot.batch"), "expected fields and integers joined by + or -"},
		{"releases out of order", base("since: 100", "since: 300"), "old (since 300) must be older than new (since 200): list the newest first"},
		{"releases name different fields", base("slot.task: 216, ", ""), "every release names the same fields"},
		{"negative offset", base("slot.task: 216", "slot.task: -8"), "-8 is not a byte offset"},
		{"no releases", "engine: e\nfields: {dwarf: [x]}\nstages:\n  verify: {binary: b, symbol: v, scope: batch}\n", "fields: expected releases"},
		{"field used without fields", "engine: e\nstages:\n  verify: {binary: b, symbol: v, scope: batch}\n  accept:\n    binary: b\n    symbol: a\n    request_id: {at: entry, from: arg0, deref: [s.x]}\n", "deref names field s.x"},
		{"nothing to choose a release by", base("  dwarf: [libserver.so]\n  build: {binary: [libcommon.so], symbol: BUILD}\n", ""), "several releases but neither dwarf nor build"},
		{"empty check", base("check: {min: 0, increasing_per: slot_id}", "check: {}"), "expected min, below or increasing_per"},
		{"increasing_per names nothing", base("increasing_per: slot_id", "increasing_per: slot"), `increasing_per: "slot" is not an int value read at entry`},
		{"increasing_per on a value", base("check: {min: 0, below:", "check: {increasing_per: x, below:"), "increasing_per is for the request_id"},
		{"below without default", base(", default: 4", ""), "expected default, a positive count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := probes.Parse("bad.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestChooseRelease(t *testing.T) {
	s := parse(t, fieldsSpec)
	tests := []struct {
		build int64
		known bool
		want  string
		note  string
	}{
		{250, true, "new", ""},
		{200, true, "new", ""},
		{199, true, "old", ""},
		{100, true, "old", ""},
		{99, true, "new", "build 99 is older than every release in the spec: offsets of new assumed"},
		{0, false, "new", "build number unknown: offsets of the newest release new assumed"},
	}
	for _, tc := range tests {
		r, note := s.Fields.Choose(tc.build, tc.known)
		if r.Name != tc.want || note != tc.note {
			t.Errorf("Choose(%d, %v) = %s, %q; want %s, %q", tc.build, tc.known, r.Name, note, tc.want, tc.note)
		}
	}
}

func TestOffsetExpr(t *testing.T) {
	offs := map[string]int64{"a.x": 240, "a.y": 112, "ns::b.z": 8}
	tests := []struct {
		src  string
		want int64
		str  string
		err  string
	}{
		{"a.x - a.y", 128, "a.x-a.y", ""},
		{"-a.y", -112, "-a.y", ""},
		{"a.x+8", 248, "a.x+8", ""},
		{"ns::b.z - 16 + a.y", 104, "ns::b.z+a.y-16", ""},
		{"0x10", 16, "16", ""},
		{"a.x -", 0, "", "expected fields and integers"},
		{"a.x a.y", 0, "", "expected fields and integers"},
		{".x", 0, "", "neither an integer nor a field"},
		{"a.", 0, "", "neither an integer nor a field"},
		{"a.b.c", 0, "", "neither an integer nor a field"},
		{"", 0, "", "empty offset"},
		{"a.x+a.x+a.x+a.x+a.x+a.x+a.x+a.x+a.x", 0, "", "more than 8 fields"},
	}
	for _, tc := range tests {
		e, err := probes.ParseOffsetExpr(tc.src)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		got, _, ok := e.Eval(offs)
		if !ok || got != tc.want || e.String() != tc.str {
			t.Errorf("%q = %d (%s), want %d (%s)", tc.src, got, e, tc.want, tc.str)
		}
	}
	e, _ := probes.ParseOffsetExpr("a.x - c.q")
	if _, missing, ok := e.Eval(offs); ok || missing != "c.q" {
		t.Errorf("Eval with c.q missing: %s, %v", missing, ok)
	}
}

func TestProcessCount(t *testing.T) {
	c := &probes.ProcessCount{Flags: []string{"-np", "--parallel"}, Env: "LLAMA_ARG_N_PARALLEL", Default: 4}
	tests := []struct {
		cmdline, env []string
		want         int64
		from         string
	}{
		{[]string{"llama-server", "-np", "2"}, nil, 2, "-np 2"},
		{[]string{"llama-server", "--parallel=8"}, nil, 8, "--parallel=8"},
		{[]string{"llama-server", "-np", "2", "--parallel", "3"}, nil, 3, "--parallel 3"}, // the last wins
		{[]string{"llama-server"}, []string{"LLAMA_ARG_N_PARALLEL=6"}, 6, "LLAMA_ARG_N_PARALLEL=6"},
		{[]string{"llama-server", "-np", "2"}, []string{"LLAMA_ARG_N_PARALLEL=6"}, 2, "-np 2"},
		{[]string{"llama-server", "-np", "-1"}, nil, 4, "-np -1: the default 4"}, // auto
		{[]string{"llama-server", "-np"}, nil, 4, "the default 4 (no -np or --parallel or LLAMA_ARG_N_PARALLEL given)"},
		{[]string{"llama-server"}, nil, 4, "the default 4 (no -np or --parallel or LLAMA_ARG_N_PARALLEL given)"},
	}
	for _, tc := range tests {
		n, from := c.Count(tc.cmdline, tc.env)
		if n != tc.want || from != tc.from {
			t.Errorf("Count(%q, %q) = %d, %q; want %d, %q", tc.cmdline, tc.env, n, from, tc.want, tc.from)
		}
	}
}
