//go:build cgo

package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/specprobe/specprobe/export"
)

type closeBuf struct{ bytes.Buffer }

func (*closeBuf) Close() error { return nil }

// TestPerfettoCounterTracks: the mocked GPU's readings, through the Perfetto
// exporter, come back from its JSON as counter ("C") tracks under the
// traced process.
func TestPerfettoCounterTracks(t *testing.T) {
	f := newFakeH200()
	f.set(func(g []*fakeGPU) {
		g[5].pids = []uint32{pid}
		g[5].util, g[5].powerMW, g[5].sm, g[5].throttle = 93, 655000, 1755, 0x4
		g[5].gpm = [4]float64{71, 40, 62, 35}
	})
	s, c := newTestSampler(f, DefaultOptions())
	if !s.begin(pid, &bytes.Buffer{}) {
		t.Fatal("begin failed")
	}
	s.KeepCounters()
	run(s, f, c, 20, 655)
	var buf closeBuf
	p := export.NewPerfettoNamed(&buf, func(int64, int64) string { return "t" })
	var cs []export.Counter
	for _, ct := range s.TakeCounters() {
		cs = append(cs, export.Counter{Pid: pid, Track: ct.Track, Unit: ct.Unit, At: ct.At.UnixNano(), Value: ct.Value})
	}
	p.(export.CounterSink).AddCounters(cs)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string             `json:"name"`
			Ph   string             `json:"ph"`
			Pid  int64              `json:"pid"`
			Ts   json.Number        `json:"ts"`
			Args map[string]float64 `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	want := map[string][2]any{
		"GPU 5 power": {"W", 655.0}, "GPU 5 utilization": {"%", 93.0}, "GPU 5 SM clock": {"MHz", 1755.0},
		"GPU 5 memory clock": {"MHz", 2619.0}, "GPU 5 throttled": {"reasons", 4.0}, "GPU 5 memory used": {"GiB", 40.0},
		"GPU 5 SM activity": {"%", 71.0}, "GPU 5 tensor activity": {"%", 62.0}, "GPU 5 DRAM activity": {"%", 35.0},
		"GPU 5 memory activity": {"%", 20.0},
	}
	seen := map[string]int{}
	for _, e := range doc.TraceEvents {
		if e.Ph != "C" {
			continue
		}
		w, ok := want[e.Name]
		if !ok {
			t.Errorf("unexpected counter track %q", e.Name)
			continue
		}
		if e.Pid != pid || e.Ts == "" || e.Args[w[0].(string)] != w[1].(float64) {
			t.Errorf("%s: pid %d ts %q args %v, want %s=%v", e.Name, e.Pid, e.Ts, e.Args, w[0], w[1])
		}
		seen[e.Name]++
	}
	for name := range want {
		if seen[name] == 0 {
			t.Errorf("no %q counter track", name)
		}
	}
	if seen["GPU 5 power"] != 20 {
		t.Errorf("%d power readings in 2s at 100ms, want 20", seen["GPU 5 power"])
	}
}
