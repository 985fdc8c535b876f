package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestCheckDurations: attach refuses negative durations, naming the flag.
func TestCheckDurations(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		duration, flush, idle, wait time.Duration
		want                        string // "" accepted
	}{
		{0, 5 * s, 2 * s, 30 * s, ""},
		{10 * s, 5 * s, 0, 0, ""},
		{-5 * s, 5 * s, 2 * s, 30 * s, "--duration -5s"},
		{0, 0, 2 * s, 30 * s, "--flush-timeout 0s"},
		{0, 5 * s, -s, 30 * s, "--request-idle -1s: want a positive duration"},
		{0, 5 * s, 2 * s, -s, "--import-wait -1s: want a positive duration"},
	} {
		err := checkDurations(tc.duration, tc.flush, tc.idle, tc.wait)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v refused: %v", tc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want %q", tc, err, tc.want)
		}
	}
}

// TestGPUFlagsNoGPU: an interval that is wrong is refused with --no-gpu too.
func TestGPUFlagsNoGPU(t *testing.T) {
	g := addGPUFlags(pflag.NewFlagSet("attach", pflag.ContinueOnError))
	g.off, g.opts.Interval = true, -time.Second
	if err := g.check(); err == nil || !strings.Contains(err.Error(), "--gpu-interval -1s") {
		t.Errorf("check with --no-gpu --gpu-interval -1s: %v", err)
	}
}

// --queue-memory takes a positive size, and a bad one names the flag
// before anything is read from the target.
func TestAttachQueueMemory(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{DefaultQueueMemory, 64 << 20, true},
		{"1GiB", 1 << 30, true},
		{"0", 0, false},
		{"-5MiB", 0, false},
		{"lots", 0, false},
	} {
		o := &attachOpts{}
		o.addFlags(pflag.NewFlagSet("attach", pflag.ContinueOnError))
		o.pid, o.flush, o.cmdline, o.queueMemory = 1, time.Second, "off", tc.in
		_, got, _, err := o.check()
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("--queue-memory %q: %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--queue-memory") {
			t.Errorf("--queue-memory %q: error %q does not name the flag", tc.in, err)
		}
	}
}

// --ring-buffer takes a power of 2 the kernel accepts, and a bad one names
// the flag before anything is read from the target.
func TestAttachRingBuffer(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"4MiB", 4 << 20, true},
		{"4KiB", 4 << 10, true},
		{"1GiB", 1 << 30, true},
		{"2KiB", 0, false},
		{"3MiB", 0, false},
		{"2GiB", 0, false},
		{"lots", 0, false},
	} {
		o := &attachOpts{}
		o.addFlags(pflag.NewFlagSet("attach", pflag.ContinueOnError))
		o.pid, o.flush, o.cmdline, o.ringBuffer = 1, time.Second, "off", tc.in
		_, _, got, err := o.check()
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("--ring-buffer %q: %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--ring-buffer") {
			t.Errorf("--ring-buffer %q: error %q does not name the flag", tc.in, err)
		}
	}
}
