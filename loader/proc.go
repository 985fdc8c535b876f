// Package loader turns a probe spec and a PID into armed probes: it finds the
// stage functions in the files the process maps, attaches the BPF programs,
// reads the ring buffer and detaches. It is the only package that arms probes
// in a target; the others that talk to the kernel are listed in
// docs/design.md (exec notification, memory reads, the watchpoint syscall).
package loader

import (
	"errors"
	"fmt"
	"github.com/cilium/ebpf/link"
	"os"
	"path/filepath"
	"strings"

	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/probes"
)

// ErrTooManyMappings: a process maps more executable files than any server.
var ErrTooManyMappings = errors.New("too many mappings")

// Mapping is one file the process has mapped executable.
type Mapping struct {
	Path string // as the process sees it
	// Open names the file from here, for messages and tools: through the
	// process's root, or map_files for a file deleted since it was mapped.
	// Open the file itself with OpenFile.
	Open  string
	Inode uint64
	pid   int
	first procfs.Map // its first executable mapping
}

// CheckPID tells whether pid names a process that can be traced, with an
// error a user can act on.
func CheckPID(pid int) error {
	if pid <= 0 || pid > procfs.MaxPID {
		return fmt.Errorf("invalid PID %d: Linux PIDs run from 1 to %d", pid, procfs.MaxPID)
	}
	st, err := procfs.ReadStat(pid)
	switch {
	case errors.Is(err, procfs.ErrNoProcess):
		return fmt.Errorf("no process with PID %d", pid)
	case err != nil:
		return fmt.Errorf("PID %d: %w", pid, err)
	case st.Kernel():
		return fmt.Errorf("PID %d (%s) is a kernel thread: it runs no program to trace", pid, st.Comm)
	case st.Zombie():
		return fmt.Errorf("PID %d (%s) has exited: it is a zombie that its parent (PID %d) has not reaped; nothing is left to trace", pid, st.Comm, st.PPID)
	}
	return nil
}

// Bounds on the executable files a process maps: vLLM with CUDA maps a few
// hundred. A process could map tens of thousands, each with a 4 KiB name.
const (
	maxMappedFiles = 8192
	maxMappedBytes = 4 << 20
)

// Mappings lists the distinct files mapped executable by pid.
func Mappings(pid int) ([]Mapping, error) {
	seen := map[string]bool{}
	var out []Mapping
	size := 0
	err := procfs.Maps(pid, func(m procfs.Map) bool {
		if !m.Exec() || !m.IsFile() || seen[m.Path] {
			return true
		}
		if size += len(m.Path); len(out) >= maxMappedFiles || size > maxMappedBytes {
			return false
		}
		seen[m.Path] = true
		mp := Mapping{Path: m.Path, Open: fmt.Sprintf("/proc/%d/root%s", pid, m.Path), Inode: m.Inode, pid: pid, first: m}
		if m.Deleted {
			mp.Open = procfs.MapFile(pid, m)
		}
		out = append(out, mp)
		return true
	})
	switch {
	case errors.Is(err, procfs.ErrNoProcess):
		return nil, fmt.Errorf("no process with PID %d", pid)
	case err != nil:
		return nil, fmt.Errorf("reading the memory map of PID %d: %w", pid, err)
	case len(out) >= maxMappedFiles || size > maxMappedBytes:
		return nil, fmt.Errorf("PID %d maps more than %d executable files or %d bytes of their names: %w", pid, maxMappedFiles, maxMappedBytes, ErrTooManyMappings)
	}
	return out, nil
}

// OpenFile opens the mapped file itself, so that no symlink or rename in
// the target's tree can put another file in its place (procfs.OpenMapped).
func (m Mapping) OpenFile() (*os.File, error) { return procfs.OpenMapped(m.pid, m.first) }

// executable opens the mapped file for uprobes. The kernel takes a path and
// resolves it itself: it gets /proc/self/fd/N of the file opened and
// checked here, so that a symlink swapped into the target's tree between
// that check and the attach cannot put the probes on another file. done
// closes the file once the probes are attached.
func (m Mapping) executable() (ex *link.Executable, done func() error, err error) {
	f, err := m.OpenFile()
	if err != nil {
		return nil, nil, err
	}
	ex, err = link.OpenExecutable(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return ex, f.Close, nil
}

// openELF opens a mapped file as an ELF file whose layout has been checked;
// errors name the file as the process maps it.
func (m Mapping) openELF() (*elfsym.File, error) {
	f, err := m.OpenFile()
	if err != nil {
		return nil, err
	}
	return elfsym.Open(f, fmt.Sprintf("%s (mapped by PID %d)", m.Path, m.pid))
}

// MatchBinary tells whether a mapped path is the file a spec names: its
// basename, a versioned basename (libfoo.so matches libfoo.so.1), or a path suffix.
func MatchBinary(path, name string) bool {
	base := filepath.Base(path)
	return base == name || strings.HasPrefix(base, name+".") ||
		(strings.Contains(name, "/") && strings.HasSuffix(path, "/"+strings.TrimPrefix(name, "/")))
}

// Exe returns the basename of the process's executable ("" when it cannot
// be read): what specs match. Messages name a process with Label.
func Exe(pid int) string { return procfs.ExeName(pid) }

// Label names a process in messages, never "" (procfs.Label).
func Label(pid int) string { return procfs.Label(pid) }

// Cmdline returns the process's command line, arguments joined by spaces.
// It may hold secrets (--api-key=...): it is for matching, not for export
// or logs (see internal/redact).
func Cmdline(pid int) string {
	args, _ := procfs.Cmdline(pid)
	return joinArgs(args)
}

// joinArgs is a command line as specs match it: the arguments joined by
// spaces, trimmed (a title setproctitle padded, a trailing empty argument).
func joinArgs(args []string) string { return strings.TrimSpace(strings.Join(args, " ")) }

// ProcessRecord is what detection matches a process by, the one reading of
// it that attach and the daemon share: its executable's name, command line
// (joinArgs), title and the files it maps. With ErrTooManyMappings (a
// process built to make the reading endless) the record has no Mapped.
func ProcessRecord(pid int) (probes.Process, error) {
	args, _ := procfs.Cmdline(pid)
	p := probes.Process{Exe: Exe(pid), Cmdline: joinArgs(args), Title: probes.Title(args)}
	maps, err := Mappings(pid)
	for _, m := range maps {
		p.Mapped = append(p.Mapped, m.Path)
	}
	return p, err
}
