package export

import (
	"fmt"
	"os"
	"strings"
	"unicode"
)

// ThreadName is a thread's name as the kernel keeps it
// (/proc/PID/task/TID/comm, at most 15 bytes; the target sets it, so it is
// cleaned of what a track title cannot hold), or "thread TID" where it
// cannot be read (the thread is gone, or the spans came from elsewhere).
func ThreadName(pid, tid int64) string {
	fallback := fmt.Sprintf("thread %d", tid)
	if pid <= 0 || tid <= 0 {
		return fallback
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return fallback
	}
	defer f.Close()
	var buf [64]byte // comm is TASK_COMM_LEN (16) with its newline; more is not a comm file
	n, _ := f.Read(buf[:])
	name := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, strings.TrimSuffix(string(buf[:n]), "\n"))
	if name = strings.TrimSpace(name); name == "" {
		return fallback
	}
	return name
}
