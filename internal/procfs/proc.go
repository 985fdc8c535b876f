package procfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// MaxPID is the largest PID Linux hands out (PID_MAX_LIMIT on 64-bit): a
// larger number cannot name a process, and must not be truncated into one.
const MaxPID = 1 << 22

// readSmall reads a /proc file that is small by nature (stat, status,
// cmdline), refusing more than max bytes.
func readSmall(pid int, name string, max int) ([]byte, error) {
	f, err := openProc(pid, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("PID %d: %w", pid, ErrNoProcess)
		}
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("/proc/%d/%s: more than %d bytes", pid, name, max)
	}
	return b, nil
}

// Stat is what specprobe reads of /proc/PID/stat.
type Stat struct {
	Comm  string
	State byte // R, S, D, Z (zombie), T, t, X, I ...
	PPID  int
	Flags uint64
	// Start is the start time in clock ticks after boot: with the PID it
	// tells a process from a later one that reuses the number.
	Start uint64
}

// pfKthread is PF_KTHREAD in the task's flags: a kernel thread.
const pfKthread = 0x00200000

// Kernel tells whether the task is a kernel thread.
func (s Stat) Kernel() bool { return s.Flags&pfKthread != 0 }

// Zombie tells whether the process has exited and waits for its parent.
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// ReadStat reads /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := readSmall(pid, "stat", 4096)
	if err != nil {
		return Stat{}, err
	}
	s, err := ParseStat(string(b))
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return s, nil
}

// ParseStat parses the content of a stat file. The command name (field 2)
// may hold spaces and parentheses: fields are counted from the last ')'.
func ParseStat(stat string) (Stat, error) {
	open := strings.IndexByte(stat, '(')
	end := strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return Stat{}, errors.New("no command name")
	}
	f := strings.Fields(stat[end+1:])
	// f[0] is field 3 (state), f[1] ppid, f[6] flags (field 9), f[19] starttime (22).
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%d fields", len(f)+2)
	}
	s := Stat{Comm: stat[open+1 : end], State: f[0][0]}
	var err1, err2, err3 error
	s.PPID, err1 = strconv.Atoi(f[1])
	s.Flags, err2 = strconv.ParseUint(f[6], 10, 64)
	s.Start, err3 = strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, err
	}
	return s, nil
}

// Status is what specprobe reads of /proc/PID/status.
type Status struct {
	UID, EUID int // real and effective
	// NSpid is the PID in each PID namespace the task is in, outermost
	// (ours, when we run in the host's) first.
	NSpid []int
}

// ReadStatus reads /proc/PID/status.
func ReadStatus(pid int) (Status, error) {
	return readStatus(pid, "status")
}

// ReadTaskStatus reads /proc/PID/task/TID/status.
func ReadTaskStatus(pid, tid int) (Status, error) {
	return readStatus(pid, fmt.Sprintf("task/%d/status", tid))
}

func readStatus(pid int, name string) (Status, error) {
	b, err := readSmall(pid, name, 64<<10)
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(string(b))
}

// ParseStatus parses the content of a status file.
func ParseStatus(text string) (Status, error) {
	s := Status{UID: -1, EUID: -1}
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid":
			if len(f) < 2 {
				return s, fmt.Errorf("bad Uid line %q", line)
			}
			var err1, err2 error
			s.UID, err1 = strconv.Atoi(f[0])
			s.EUID, err2 = strconv.Atoi(f[1])
			if err1 != nil || err2 != nil {
				return s, fmt.Errorf("bad Uid line %q", line)
			}
		case "NSpid":
			for _, x := range f {
				n, err := strconv.Atoi(x)
				if err != nil {
					return s, fmt.Errorf("bad NSpid line %q", line)
				}
				s.NSpid = append(s.NSpid, n)
			}
		}
	}
	return s, nil
}

// maxTasks bounds a thread listing: threads-max is in the hundreds of
// thousands at most.
const maxTasks = 1 << 20

// Tasks lists the thread ids of pid.
func Tasks(pid int) ([]int, error) {
	f, err := openProc(pid, "task")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var tids []int
	for {
		names, err := f.Readdirnames(4096)
		for _, n := range names {
			if tid, err := strconv.Atoi(n); err == nil {
				tids = append(tids, tid)
			}
		}
		if len(tids) > maxTasks {
			return nil, fmt.Errorf("PID %d: more than %d threads", pid, maxTasks)
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			return tids, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing the threads of PID %d: %w", pid, err)
		}
	}
}

// TaskAlive tells whether tid is a thread of pid: false once /proc no
// longer lists it.
func TaskAlive(pid, tid int) bool {
	_, err := os.Lstat(fmt.Sprintf("/proc/%d/task/%d", pid, tid))
	return !errors.Is(err, os.ErrNotExist)
}

// maxCmdline bounds the command line read (the kernel allows up to a
// quarter of the stack limit: megabytes).
const maxCmdline = 128 << 10

// Cmdline returns the arguments of pid; a longer command line is cut at
// maxCmdline.
func Cmdline(pid int) ([]string, error) {
	f, err := openProc(pid, "cmdline")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCmdline))
	if err != nil {
		return nil, err
	}
	b = []byte(strings.TrimRight(string(b), "\x00"))
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// Getenv returns one variable of pid's initial environment, as "NAME=value"
// (nothing else of it is kept: it may hold secrets); "" when it is not set
// in the first maxCmdline bytes.
func Getenv(pid int, name string) string {
	f, err := openProc(pid, "environ")
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCmdline))
	if err != nil {
		return ""
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if strings.HasPrefix(kv, name+"=") {
			return kv
		}
	}
	return ""
}

// Exe returns the path of the process's executable as its mount namespace
// names it, without a " (deleted)" mark; "" for a kernel thread or a
// process gone.
func Exe(pid int) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(p, " (deleted)")
}

// ExeName is the basename of Exe.
func ExeName(pid int) string {
	if p := Exe(pid); p != "" {
		return filepath.Base(p)
	}
	return ""
}

// Label names a process in messages: its executable's basename, else its
// command name (comm: a kernel thread, or an exe link we may not read, as
// for a container's PID 1), else "unknown"; never "". Not for matching:
// comm is whatever the process set.
func Label(pid int) string {
	comm := ""
	if st, err := ReadStat(pid); err == nil {
		comm = st.Comm
	}
	return label(ExeName(pid), comm)
}

func label(exe, comm string) string {
	switch {
	case exe != "":
		return exe
	case strings.TrimSpace(comm) != "":
		return comm
	}
	return "unknown"
}

// Cgroup reads /proc/PID/cgroup.
func Cgroup(pid int) ([]byte, error) {
	return readSmall(pid, "cgroup", 64<<10)
}
