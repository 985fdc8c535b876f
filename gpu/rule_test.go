package gpu

import (
	"testing"
	"time"
)

func TestDescribes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	span := func(a, b int) interval { return interval{at(a), at(b)} }
	for _, c := range []struct {
		name string
		w, s interval
		want bool
	}{
		{"a 1s average on a 1ms stage", span(0, 1000), span(999, 1000), false},
		{"a 100ms reading on a 1ms stage", span(900, 1000), span(950, 951), false},
		{"a 100ms reading on a 2ms step", span(900, 1000), span(998, 1000), false},
		{"a 100ms reading on a 50ms stage at its end", span(900, 1000), span(925, 975), true},
		{"a 100ms reading on a 49ms stage", span(900, 1000), span(925, 974), false},
		{"a 100ms reading on a 200ms stage it follows", span(1100, 1200), span(900, 1100), true},
		{"a 100ms reading ending past half the span after it", span(1210, 1310), span(1000, 1200), false},
		{"a 1s average on a 500ms stage it ends with", span(0, 1000), span(250, 750), true},
		{"a 1s average on a 500ms stage it does not centre on", span(0, 1000), span(500, 1000), false},
		{"a 1s average on a 499ms stage", span(0, 1000), span(250, 749), false},
		{"a window inside a long span", span(400, 600), span(0, 2000), true},
		{"a window before a long span", span(-2000, -1500), span(0, 2000), false},
		{"no window", interval{}, span(0, 2000), false},
		{"an empty span", span(0, 0), span(0, 0), false},
	} {
		if got := describes(c.w, c.s); got != c.want {
			t.Errorf("%s: describes %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFieldWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Sample{At: t0, MemFrom: t0.Add(-time.Second), MemAt: t0.Add(-100 * time.Millisecond),
		GPMFrom: t0.Add(-500 * time.Millisecond), GPMAt: t0}
	prev := t0.Add(-100 * time.Millisecond)
	for _, c := range []struct {
		f    Field
		want interval
	}{
		{FUtil, interval{t0.Add(-time.Second), t0}},
		{FPower, interval{t0.Add(-time.Second), t0}},
		{FSMClock, interval{prev, t0}},
		{FThrottle, interval{prev, t0}},
		{FMemUsed, interval{s.MemFrom, s.MemAt}},
		{FTensor, interval{s.GPMFrom, s.GPMAt}},
		{FTemp, interval{}},
		{FEnergy, interval{}},
	} {
		if got := fieldWindow(c.f, &s, prev); got != c.want {
			t.Errorf("field %b: window %v, want %v", c.f, got, c.want)
		}
	}
	if w := fieldWindow(FSMClock, &s, time.Time{}); w.valid() {
		t.Errorf("the first sample's clock has a window %v", w)
	}
}
