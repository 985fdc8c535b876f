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
	History         time.Duration // how far back a stage's window may reach
}

// Defaults as docs/design.md gives them: cheap fields every 100ms, process lists every 1s,
// and GPM at 500ms, well past the >100ms it needs between samples.
func DefaultOptions() Options {
	return Options{Interval: 100 * time.Millisecond, ProcessInterval: time.Second, GPMInterval: 500 * time.Millisecond, History: 30 * time.Second}
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
	}
	return nil
}
