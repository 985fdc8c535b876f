package discover

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ID tells a process from a later one that reuses its PID: the start time
// (clock ticks after boot) differs. An execve keeps both.
type ID struct {
	PID   int
	Start uint64
}

// Identify reads the process's start time from /proc/PID/stat.
func Identify(pid int) (ID, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ID{}, err
	}
	return parseStat(pid, string(b))
}

func parseStat(pid int, stat string) (ID, error) {
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted from the last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return ID{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return ID{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return ID{}, fmt.Errorf("/proc/%d/stat: start time %q", pid, f[19])
	}
	return ID{PID: pid, Start: start}, nil
}
