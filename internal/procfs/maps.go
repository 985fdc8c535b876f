// Package procfs reads what specprobe needs from /proc: memory maps,
// threads, a process's state, ids and command line. Every file here is
// written by the kernel about a process an unprivileged user controls (its
// file names, its number of mappings and threads), so every read is bounded
// and every parse is exact.
package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Map is one line of /proc/PID/maps.
type Map struct {
	Start, End   uint64
	Perms        string // "r-xp"
	Offset       uint64 // in the file
	Major, Minor uint32 // the file's device
	Inode        uint64
	// Path is as the process sees it (inside its mount namespace): a file
	// ("/usr/lib/..."), a pseudo-mapping ("[heap]", "[vdso]") or "" for
	// anonymous memory. Spaces inside it are kept as they are.
	Path string
	// Deleted: the kernel marked the file unlinked (" (deleted)", removed
	// from Path). A file whose real name ends so reads the same: callers
	// tell them apart by the inode.
	Deleted bool
}

// Exec tells whether the mapping is executable.
func (m Map) Exec() bool { return len(m.Perms) > 2 && m.Perms[2] == 'x' }

// IsFile tells whether the mapping is backed by a file.
func (m Map) IsFile() bool { return strings.HasPrefix(m.Path, "/") }

// Bounds on /proc/PID/maps. A line is the fixed fields (under 100 bytes)
// and a path of at most PATH_MAX (4096); vm.max_map_count defaults to
// 65530 mappings. Beyond these the file is not one the kernel wrote.
const (
	maxMapLine  = 8 << 10
	maxMapBytes = 64 << 20
	maxMaps     = 1 << 20
)

// ErrNoProcess is returned when the PID does not exist (or has gone).
var ErrNoProcess = errors.New("no such process")

func openProc(pid int, name string) (*os.File, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("PID %d: %w", pid, ErrNoProcess)
	}
	return f, err
}

// Maps calls each for every mapping of pid, in address order, until each
// returns false.
func Maps(pid int, each func(Map) bool) error {
	f, err := openProc(pid, "maps")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := ParseMaps(f, each); err != nil {
		return fmt.Errorf("/proc/%d/maps: %w", pid, err)
	}
	return nil
}

// ParseMaps reads maps-formatted text from r.
func ParseMaps(r io.Reader, each func(Map) bool) error {
	br := bufio.NewReaderSize(io.LimitReader(r, maxMapBytes+1), 64<<10)
	total := 0
	for n := 0; ; n++ {
		line, err := readLine(br, maxMapLine)
		total += len(line) + 1
		if total > maxMapBytes || n >= maxMaps {
			return fmt.Errorf("more than %d bytes or %d mappings", maxMapBytes, maxMaps)
		}
		if len(line) > 0 {
			m, perr := ParseMapLine(string(line))
			if perr != nil {
				return fmt.Errorf("line %d: %w", n+1, perr)
			}
			if !each(m) {
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// max is an error rather than a buffer grown without end.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max+1 {
			return nil, fmt.Errorf("a line longer than %d bytes", max)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// ParseMapLine parses "start-end perms offset major:minor inode   path".
// The five fields are separated by single spaces; the path, after padding,
// runs to the end of the line.
func ParseMapLine(line string) (Map, error) {
	var m Map
	fields := make([]string, 0, 5)
	rest := line
	for range 5 {
		f, r, ok := strings.Cut(rest, " ")
		if !ok {
			f, r = rest, ""
		}
		fields = append(fields, f)
		rest = r
	}
	bad := func(what string) (Map, error) { return Map{}, fmt.Errorf("bad %s in %q", what, line) }
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return bad("address range")
	}
	var err1, err2, err3, err4 error
	m.Start, err1 = strconv.ParseUint(lo, 16, 64)
	m.End, err2 = strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || m.End < m.Start {
		return bad("address range")
	}
	if len(fields[1]) != 4 {
		return bad("permissions")
	}
	m.Perms = fields[1]
	if m.Offset, err1 = strconv.ParseUint(fields[2], 16, 64); err1 != nil {
		return bad("offset")
	}
	maj, min, ok := strings.Cut(fields[3], ":")
	var major, minor uint64
	major, err3 = strconv.ParseUint(maj, 16, 32)
	minor, err4 = strconv.ParseUint(min, 16, 32)
	if !ok || err3 != nil || err4 != nil {
		return bad("device")
	}
	m.Major, m.Minor = uint32(major), uint32(minor)
	if m.Inode, err1 = strconv.ParseUint(fields[4], 10, 64); err1 != nil {
		return bad("inode")
	}
	m.Path = strings.TrimLeft(rest, " ")
	if p, ok := strings.CutSuffix(m.Path, " (deleted)"); ok && strings.HasPrefix(p, "/") {
		m.Path, m.Deleted = p, true
	}
	return m, nil
}
