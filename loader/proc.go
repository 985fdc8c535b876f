// Package loader turns a probe spec and a PID into armed probes: it finds the
// stage functions in the files the process maps, attaches the BPF programs,
// reads the ring buffer and detaches. It is the only package that talks to the
// kernel.
package loader

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Mapping is one file the process has mapped.
type Mapping struct {
	Path  string // as the process sees it
	Open  string // how to open it from here, through the process's root
	Inode uint64
}

// CheckPID tells whether a process exists, with an error a user can act on.
func CheckPID(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("invalid PID %d", pid)
	}
	err := syscall.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return nil
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("no process with PID %d", pid)
	default:
		return fmt.Errorf("PID %d: %w", pid, err)
	}
}

// Mappings lists the distinct files mapped executable by pid.
func Mappings(pid int) ([]Mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("no process with PID %d", pid)
		}
		return nil, fmt.Errorf("reading the memory map of PID %d: %w", pid, err)
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []Mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.SplitN(sc.Text(), " ", 6)
		if len(fields) < 6 || !strings.Contains(fields[1], "x") {
			continue
		}
		path := strings.TrimLeft(fields[5], " ")
		if !strings.HasPrefix(path, "/") || seen[path] {
			continue
		}
		seen[path] = true
		inode, _ := strconv.ParseUint(fields[4], 10, 64)
		open := fmt.Sprintf("/proc/%d/root%s", pid, path)
		// A deleted or replaced file is still reachable through map_files.
		if strings.HasSuffix(path, " (deleted)") || !sameInode(open, inode) {
			open = fmt.Sprintf("/proc/%d/map_files/%s", pid, fields[0])
		}
		out = append(out, Mapping{Path: path, Open: open, Inode: inode})
	}
	return out, sc.Err()
}

func sameInode(path string, inode uint64) bool {
	var st syscall.Stat_t
	return syscall.Stat(path, &st) == nil && st.Ino == inode
}

// MatchBinary tells whether a mapped path is the file a spec names: its
// basename, a versioned basename (libfoo.so matches libfoo.so.1), or a path suffix.
func MatchBinary(path, name string) bool {
	base := filepath.Base(path)
	return base == name || strings.HasPrefix(base, name+".") ||
		(strings.Contains(name, "/") && strings.HasSuffix(path, "/"+strings.TrimPrefix(name, "/")))
}

// Exe returns the basename of the process's executable.
func Exe(pid int) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	return filepath.Base(strings.TrimSuffix(p, " (deleted)"))
}

// Cmdline returns the process's command line, arguments joined by spaces.
func Cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
