// Command gpucheck runs specprobe's GPU sampler against the real NVIDIA
// driver and prints each NVML call's latency, the values read, and how often
// each value actually changes (scripts/gpu-check.sh runs it on a GPU machine).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/specprobe/specprobe/gpu"
)

func main() {
	o := gpu.CheckOptions{Options: gpu.DefaultOptions()}
	flag.IntVar(&o.PID, "pid", 0, "sample the GPUs this process uses (0: every GPU)")
	flag.DurationVar(&o.Interval, "interval", o.Interval, "sampling interval of the cheap fields")
	flag.DurationVar(&o.ProcessInterval, "process-interval", o.ProcessInterval, "process list and temperature interval")
	flag.DurationVar(&o.GPMInterval, "gpm-interval", o.GPMInterval, "GPM interval")
	flag.DurationVar(&o.EnergyInterval, "energy-interval", o.EnergyInterval, "energy counter interval")
	flag.DurationVar(&o.MemoryInterval, "memory-interval", o.MemoryInterval, "memory used interval")
	flag.DurationVar(&o.Duration, "duration", 5*time.Second, "how long to sample")
	flag.Parse()
	if err := gpu.Check(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		os.Exit(1)
	}
}
