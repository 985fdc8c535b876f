package gpu

import (
	"fmt"
	"time"
)

// Options are the sampling intervals.
type Options struct {
	Interval        time.Duration // utilisation, memory, clocks, power, energy, throttling
	ProcessInterval time.Duration // which GPUs the PID uses; temperature
	GPMInterval     time.Duration // SM activity, occupancy, tensor and DRAM activity
	EnergyInterval  time.Duration // the energy counter (a 3-4 ms call on an H200)
	MemoryInterval  time.Duration // memory used (up to 16 ms a call on an H200)
	WindowMin       time.Duration // gpu_window spans: at least this long
	History         time.Duration // how far back a stage's window may reach
}

// Defaults as docs/design.md gives them: cheap fields every 100ms, process lists every 1s,
// and GPM at 500ms, well past the >100ms it needs between samples. The slow
// calls no more often than their values change: the energy counter moves
// every 100 ms; memory used moves when the server allocates, which its
// caching allocator makes rare, so once a second.
func DefaultOptions() Options {
	return Options{Interval: 100 * time.Millisecond, ProcessInterval: time.Second, GPMInterval: 500 * time.Millisecond,
		EnergyInterval: 100 * time.Millisecond, MemoryInterval: time.Second, WindowMin: 2 * time.Second, History: 30 * time.Second}
}

// Validate rejects intervals that would hammer the driver lock.
func (o Options) Validate() error {
	switch {
	case o.Interval < 10*time.Millisecond:
		return fmt.Errorf("--gpu-interval %s: at least 10ms (NVML calls hold a driver lock the server needs)", o.Interval)
	case o.ProcessInterval < time.Second:
		return fmt.Errorf("--gpu-process-interval %s: at least 1s (process lists are slow NVML calls)", o.ProcessInterval)
	case o.GPMInterval <= 100*time.Millisecond:
		return fmt.Errorf("--gpu-gpm-interval %s: more than 100ms (GPM needs that between samples)", o.GPMInterval)
	case o.EnergyInterval < 100*time.Millisecond:
		return fmt.Errorf("--gpu-energy-interval %s: at least 100ms (the counter moves no faster, and a read takes milliseconds)", o.EnergyInterval)
	case o.MemoryInterval < 100*time.Millisecond:
		return fmt.Errorf("--gpu-memory-interval %s: at least 100ms (a read can take milliseconds)", o.MemoryInterval)
	case o.WindowMin < time.Second:
		return fmt.Errorf("--gpu-window %s: at least 1s (the energy counter's 100ms steps must be a small part of it)", o.WindowMin)
	}
	return nil
}
