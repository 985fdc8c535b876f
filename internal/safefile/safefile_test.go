package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(ok, []byte("engine: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegular(ok, 100); err != nil || string(b) != "engine: x\n" {
		t.Errorf("ReadRegular(%s) = %q, %v", ok, b, err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, 101), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{big, "more than the 100 accepted"},
		{fifo, "named pipe (FIFO), not a regular file"},
		{"/dev/zero", "character device, not a regular file"},
		{dir, "directory, not a regular file"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadRegular(tc.path, 100); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("ReadRegular(%s) = %v, want an error naming the file and saying %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadRegular(%s) still blocked after 5s", tc.path)
		}
	}
}

// tree makes root/usr/lib/libx.so (a file), root/link -> /etc (absolute
// symlink), root/usr/lib/alias.so -> libx.so, root/up -> ../.. and a FIFO.
func tree(t *testing.T) string {
	root := t.TempDir()
	lib := filepath.Join(root, "usr", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "libx.so"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link": "/etc", "usr/lib/alias.so": "libx.so", "up": "../.."} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestOpenInRoot(t *testing.T) {
	root := tree(t)
	for _, open := range []struct {
		name string
		fn   func(root, path string) (*os.File, error)
	}{
		{"openat2", OpenInRoot},
		{"walk", func(root, path string) (*os.File, error) {
			d, err := os.Open(root)
			if err != nil {
				return nil, err
			}
			defer d.Close()
			fd, err := walk(int(d.Fd()), path)
			if err != nil {
				return nil, err
			}
			return os.NewFile(uintptr(fd), path), nil
		}},
	} {
		t.Run(open.name, func(t *testing.T) {
			f, err := open.fn(root, "/usr/lib/libx.so")
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 16)
			n, _ := f.Read(b)
			f.Close()
			if string(b[:n]) != "inside" {
				t.Errorf("read %q", b[:n])
			}
			for _, p := range []string{"/link/passwd", "/usr/lib/alias.so", "/up/etc/passwd"} {
				if f, err := open.fn(root, p); err == nil {
					f.Close()
					t.Errorf("%s opened through a symlink", p)
				} else if !errors.Is(err, ErrSymlink) && !errors.Is(err, syscall.ELOOP) {
					t.Errorf("%s: %v, want a symlink error", p, err)
				}
			}
		})
	}
	if _, err := OpenInRoot(root, "/usr/../../etc/passwd"); err == nil {
		t.Error(`a path with ".." opened`)
	}
	done := make(chan error, 1)
	go func() { _, err := OpenInRoot(root, "/fifo"); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("FIFO: %v, want refused", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
}
