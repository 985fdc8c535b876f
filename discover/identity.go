package discover

import "github.com/specprobe/specprobe/internal/procfs"

// ID tells a process from a later one that reuses its PID: the start time
// (clock ticks after boot) differs. An execve keeps both.
type ID struct {
	PID   int
	Start uint64
}

// Identify reads the process's start time from /proc/PID/stat.
func Identify(pid int) (ID, error) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return ID{}, err
	}
	return ID{PID: pid, Start: st.Start}, nil
}
