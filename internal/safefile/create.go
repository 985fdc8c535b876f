package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// OutputMode is the mode of an output file Create makes. Spans name
// requests (their ids, sometimes the command line) and the trace of a
// server's work: nothing for the node's other users to read.
const OutputMode = 0o600

// Create opens path for writing an output file (spans, a trace) the way a
// tool run as root must in a directory other users can write (/tmp): any
// of them may have put a symbolic link, a hard link, a FIFO or a device at
// the name to make root write where they cannot.
//
//   - No symbolic link is followed, at the name or, where the kernel has
//     openat2, in the directories above it (elsewhere the name alone).
//   - A new file is made with O_EXCL, mode OutputMode.
//   - An existing file is truncated only when it is a regular file with one
//     link, owned by the user specprobe runs as: it is looked at through an
//     O_PATH descriptor first, so a device is never opened (opening
//     /dev/watchdog arms it), then opened for writing and checked to be the
//     same file before it is truncated. The null device is the exception:
//     written to, not truncated.
func Create(path string) (*os.File, error) {
	if path == "" {
		return nil, errors.New("output file: empty path")
	}
	dirPath, name := filepath.Split(path)
	if name == "" || name == "." || name == ".." {
		return nil, fmt.Errorf("%s: not a file name", path)
	}
	dir, err := openDir(dirPath)
	if err != nil {
		return nil, outErr(path, err)
	}
	defer unix.Close(dir)
	fd, err := openAt(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, OutputMode)
	if err == nil {
		return os.NewFile(uintptr(fd), path), nil
	}
	if !errors.Is(err, unix.EEXIST) {
		return nil, outErr(path, err)
	}
	return truncateExisting(dir, name, path)
}

// truncateExisting opens the existing file name in dir for writing, once
// it has passed checkExisting, and empties it.
func truncateExisting(dir int, name, path string) (*os.File, error) {
	pfd, err := openAt(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, outErr(path, err)
	}
	pf := os.NewFile(uintptr(pfd), path)
	defer pf.Close()
	before, err := pf.Stat()
	if err != nil {
		return nil, outErr(path, err)
	}
	if err := checkExisting(path, before, os.Geteuid()); err != nil {
		return nil, err
	}
	// O_NONBLOCK: a FIFO swapped in since the check must not block the open.
	fd, err := openAt(dir, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, outErr(path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	after, err := f.Stat()
	if err == nil && !os.SameFile(before, after) {
		err = fmt.Errorf("%s: replaced by another file while being opened: refusing to write to it", path)
	} else if err == nil {
		err = checkExisting(path, after, os.Geteuid())
	}
	if err == nil && !nullDevice(after) {
		err = f.Truncate(0)
	}
	if err == nil {
		err = unix.SetNonblock(fd, false)
	}
	if err != nil {
		f.Close()
		return nil, outErr(path, err)
	}
	return f, nil
}

// checkExisting decides whether an existing output file, st, may be
// truncated by the user euid.
func checkExisting(path string, st fs.FileInfo, euid int) error {
	if st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s: %w", path, errLinkOnTheWay)
	}
	if nullDevice(st) {
		return nil
	}
	if err := Regular(path, st); err != nil {
		return fmt.Errorf("%w: refusing to write to it as an output file", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner to check", path)
	}
	if int(sys.Uid) != euid {
		return fmt.Errorf("%s: exists and is owned by uid %d, not by uid %d that specprobe runs as: refusing to truncate another user's file (remove it, or give another path)", path, sys.Uid, euid)
	}
	if sys.Nlink > 1 {
		return fmt.Errorf("%s: exists with %d hard links: refusing to truncate a file that has other names (remove it, or give another path)", path, sys.Nlink)
	}
	return nil
}

// nullDevice: the null device (character device 1:3, whatever its name),
// the one device an output may go to: writing to it discards, opening it
// does nothing else ("count the spans, keep none"). /dev/full (1:7) and
// every other device are refused.
func nullDevice(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && st.Mode()&fs.ModeCharDevice != 0 && unix.Major(sys.Rdev) == 1 && unix.Minor(sys.Rdev) == 3
}

// resolveNoLinks: no symbolic link anywhere on the path, and none of
// /proc's magic links.
const resolveNoLinks = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openDir opens the directory an output file goes in ("" is the working
// directory), refusing symbolic links on the way where openat2 can.
func openDir(path string) (int, error) {
	if path == "" {
		path = "."
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveNoLinks}
	fd, err := createOpenat2(unix.AT_FDCWD, path, how)
	if noOpenat2(err) {
		// The name itself is still opened with O_NOFOLLOW.
		fd, err = unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return -1, fmt.Errorf("directory %s: %w", path, errLinkOnTheWay)
	}
	return fd, err
}

// openAt opens name in dir without following a symbolic link.
func openAt(dir int, name string, flags int, mode uint32) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: resolveNoLinks | unix.RESOLVE_BENEATH}
	if flags&unix.O_CREAT == 0 {
		how.Mode = 0
	}
	fd, err := createOpenat2(dir, name, how)
	if noOpenat2(err) {
		fd, err = unix.Openat(dir, name, flags, mode)
	}
	if errors.Is(err, unix.ELOOP) {
		return -1, errLinkOnTheWay
	}
	return fd, err
}

// createOpenat2 is unix.Openat2; tests make it fail as on Linux before 5.6.
var createOpenat2 = unix.Openat2

// noOpenat2: Linux before 5.6, or a seccomp filter that refuses openat2.
func noOpenat2(err error) bool {
	return errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) && !openat2Works()
}

var errLinkOnTheWay = errors.New("a symbolic link on the way: refusing to write through a symlink (give the path without links)")

func outErr(path string, err error) error {
	if errors.Is(err, unix.ENXIO) {
		err = errors.New("a named pipe (FIFO) or device without a reader: refusing to write to it as an output file")
	}
	return fmt.Errorf("output file %s: %w", path, err)
}
