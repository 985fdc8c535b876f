// Package safefile opens files a hostile user may have prepared: a path
// under another process's root that a symlink swapped in must not redirect,
// and input files (specs, configs) that may be a FIFO, a device or huge.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ReadRegular reads a regular file of at most max bytes. A FIFO would block
// the reader forever and /dev/zero would never end: both are refused, as is
// any file larger than max, before a byte of it is read.
func ReadRegular(path string, max int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO with no writer would otherwise wait.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := Regular(path, st); err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d accepted", path, st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: grew past the %d bytes accepted while being read", path, max)
	}
	return b, nil
}

// Regular returns an error naming what path is when it is not a regular file.
func Regular(path string, st fs.FileInfo) error {
	if st.Mode().IsRegular() {
		return nil
	}
	kind := "special file"
	switch m := st.Mode(); {
	case m.IsDir():
		kind = "directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		kind = "character device"
	case m&fs.ModeDevice != 0:
		kind = "block device"
	case m&fs.ModeSocket != 0:
		kind = "socket"
	}
	return fmt.Errorf("%s is a %s, not a regular file", path, kind)
}

// ErrSymlink marks a path that went through a symbolic link where none may be.
var ErrSymlink = errors.New("a symbolic link on the way")

// OpenInRoot opens the regular file at path, resolved inside root (a
// directory such as /proc/PID/root), read-only. The path must hold no
// symbolic link: callers pass paths the kernel printed for an open file
// (/proc/PID/maps), which are canonical, so a link on the way means the
// path was changed since, to lead elsewhere. ".." cannot leave root.
func OpenInRoot(root, path string) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dir)
	full := root + "/" + strings.TrimLeft(path, "/")
	if slices.Contains(strings.Split(path, "/"), "..") {
		return nil, fmt.Errorf("%s: a path with \"..\" is not one the kernel printed", full)
	}
	fd, err := openat2(dir, path)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) && !openat2Works() {
		fd, err = walk(dir, path) // Linux before 5.6, or a seccomp filter that refuses openat2
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, &fs.PathError{Op: "open", Path: full, Err: ErrSymlink}
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: full, Err: err}
	}
	f := os.NewFile(uintptr(fd), full)
	st, err := f.Stat()
	if err == nil {
		err = Regular(full, st)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openFlags: O_NONBLOCK so that a FIFO put in the file's place does not
// block the open.
const openFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY

func openat2(dir int, path string) (int, error) {
	return unix.Openat2(dir, strings.TrimLeft(path, "/"), &unix.OpenHow{
		Flags:   openFlags,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS,
	})
}

// openat2Works tells EPERM from a seccomp filter apart from EPERM on the
// file: openat2 of "." in / succeeds where the syscall is allowed.
func openat2Works() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// walk opens path one component at a time below dir, refusing symbolic
// links (O_NOFOLLOW), which is what openat2's flags above do.
func walk(dir int, path string) (int, error) {
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	if len(parts) == 0 {
		return -1, unix.EISDIR
	}
	cur, err := unix.Dup(dir)
	if err != nil {
		return -1, err
	}
	for i, p := range parts {
		last := i == len(parts)-1
		flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			flags = openFlags | unix.O_NOFOLLOW
		}
		next, err := unix.Openat(cur, p, flags, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		if !last {
			var st unix.Stat_t
			if err := unix.Fstat(next, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				unix.Close(next)
				if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					err = unix.ELOOP
				} else if err == nil {
					err = unix.ENOTDIR
				}
				return -1, err
			}
		}
		cur = next
	}
	return cur, nil
}
