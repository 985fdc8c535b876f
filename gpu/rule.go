package gpu

import "time"

// NVML's values are averages over a window or readings that stand for the
// time since the previous one; a 1–2 ms stage is a small part of any of them.
// A value goes on a span only where its window can describe that span.

// The driver's own averaging windows. Utilisation is averaged over 1/6 s to
// 1 s depending on the product, and NVML does not say which: the longest is
// assumed. Hopper's power reading is a 1 s average.
const (
	utilAverage  = time.Second
	powerAverage = time.Second
)

// interval is the time a value covers.
type interval struct{ start, end time.Time }

func (w interval) dur() time.Duration { return w.end.Sub(w.start) }

func (w interval) valid() bool { return !w.start.IsZero() && !w.end.Before(w.start) }

func (w interval) union(o interval) interval {
	if !w.valid() {
		return o
	}
	if o.start.Before(w.start) {
		w.start = o.start
	}
	if o.end.After(w.end) {
		w.end = o.end
	}
	return w
}

// describes is the rule: a value's window describes a span when it lies
// within the span stretched by half the span's length on each side. The
// window is then at most twice as long as the span and reaches at most half
// of it beyond either end, so most of what it averaged happened during the
// span's neighbourhood; a 100 ms window describes spans of 50 ms and more that
// it sits on, a 1 s average spans of 500 ms and more.
func describes(w, span interval) bool {
	d := span.dur()
	if !w.valid() || d <= 0 {
		return false
	}
	m := d / 2
	return !w.start.Before(span.start.Add(-m)) && !w.end.After(span.end.Add(m))
}

// fieldWindow is the window the value of field f in smp covers; prevAt is
// when the sample before smp was taken (zero for none). A field without a
// known window gets an invalid one and goes on no span.
func fieldWindow(f Field, smp *Sample, prevAt time.Time) interval {
	switch f {
	case FUtil, FMemActivity:
		return interval{smp.At.Add(-utilAverage), smp.At}
	case FPower:
		return interval{smp.At.Add(-powerAverage), smp.At}
	case FSMClock, FMemClock, FThrottle: // read now, standing for the time since the last read
		if prevAt.IsZero() {
			return interval{}
		}
		return interval{prevAt, smp.At}
	case FMemUsed:
		return interval{smp.MemFrom, smp.MemAt}
	case FSMActivity, FSMOccupancy, FTensor, FDRAM: // GPM: over its sample pair
		return interval{smp.GPMFrom, smp.GPMAt}
	}
	return interval{} // temperature, energy: not on stage spans
}
