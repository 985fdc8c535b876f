package loader

import "github.com/specprobe/specprobe/internal/perfbp"

// OpenWatchpoint opens on thread tid the hardware write watchpoint ArmWatch
// puts on each thread (8 bytes at addr, inherited, dropped on exec) and
// returns its perf event fd, for a program to be attached to it. The
// benchmarks' baseline (internal/benchprobes) runs an empty program there.
func OpenWatchpoint(tid int, addr uint64) (int, error) { return perfbp.OpenWrite(tid, addr) }
