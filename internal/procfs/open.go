package procfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/specprobe/specprobe/internal/safefile"
)

// OpenMapped opens the file behind a mapping of pid. Through the process's
// root no symbolic link is followed: a path from /proc/PID/maps has none,
// so one found on the way was put there since, to send the reader
// elsewhere, and the open fails with safefile.ErrSymlink. The file opened
// must be the inode the process maps; a file deleted or replaced since is
// reached through map_files, the kernel's own link to the mapping (which
// needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).
func OpenMapped(pid int, m Map) (*os.File, error) {
	var first error
	if !m.Deleted {
		f, err := safefile.OpenInRoot(fmt.Sprintf("/proc/%d/root", pid), m.Path)
		if errors.Is(err, safefile.ErrSymlink) {
			return nil, fmt.Errorf("%s, mapped by PID %d, leads through a symbolic link that was not there when it was mapped: %w", m.Path, pid, err)
		}
		if err == nil {
			ino := inode(f)
			if ino == m.Inode {
				return f, nil
			}
			f.Close()
			err = fmt.Errorf("%s is inode %d, not the inode %d that PID %d maps: the file was replaced since", f.Name(), ino, m.Inode, pid)
		}
		first = err
	}
	path := MapFile(pid, m)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err == nil && inode(f) != m.Inode {
		f.Close()
		err = fmt.Errorf("%s is no longer the mapping of inode %d", path, m.Inode)
	}
	if err != nil {
		if first != nil {
			return nil, fmt.Errorf("opening %s, mapped by PID %d: %v; through map_files: %v", m.Path, pid, first, err)
		}
		return nil, fmt.Errorf("opening %s, mapped by PID %d and deleted since: %v", m.Path, pid, err)
	}
	return f, nil
}

// MapFile is the map_files link of a mapping.
func MapFile(pid int, m Map) string {
	return fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End)
}

func inode(f *os.File) uint64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Ino
	}
	return 0
}
