package safefile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCreate(t *testing.T) { testCreate(t, true) }

// TestCreateWithoutOpenat2: as on Linux before 5.6, where only the name
// itself is opened without following a link.
func TestCreateWithoutOpenat2(t *testing.T) {
	createOpenat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	defer func() { createOpenat2 = unix.Openat2 }()
	testCreate(t, false)
}

// testCreate: openat2 says whether links above the name are refused too.
func testCreate(t *testing.T, openat2 bool) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	precious := write("precious", "keep me")
	own := write("own.jsonl", "old spans")
	hard := write("hard", "linked")
	if err := os.Link(hard, filepath.Join(dir, "hard2")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	dangling := filepath.Join(dir, "dangling")
	linkDir := filepath.Join(dir, "linkdir")
	fifo := filepath.Join(dir, "fifo")
	sub := filepath.Join(dir, "sub")
	for _, err := range []error{os.Symlink(precious, link), os.Symlink(filepath.Join(dir, "nowhere"), dangling),
		os.Symlink(dir, linkDir), syscall.Mkfifo(fifo, 0o644), os.Mkdir(sub, 0o755)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, path, want string // want "" for success
	}{
		{"new file", filepath.Join(dir, "new.jsonl"), ""},
		{"own file", own, ""},
		{"symlink to a file", link, "refusing to write through a symlink"},
		{"dangling symlink", dangling, "refusing to write through a symlink"},
		{"symlink above", filepath.Join(linkDir, "x.jsonl"), "refusing to write through a symlink"},
		{"hard link", hard, "2 hard links"},
		{"fifo", fifo, "named pipe (FIFO), not a regular file"},
		{"directory", sub, "directory, not a regular file"},
		{"device", "/dev/full", "character device, not a regular file"},
		{"directory missing", filepath.Join(dir, "none", "x"), "no such file"},
		{"empty", "", "empty path"},
		{"dot dot", dir + "/..", "not a file name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "symlink above" && !openat2 {
				tc.want = "" // followed: only the name is opened with O_NOFOLLOW
			}
			done := make(chan struct{})
			var f *os.File
			var err error
			go func() { f, err = Create(tc.path); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("Create(%s) still blocked after 5s", tc.path)
			}
			if tc.want != "" {
				if err == nil {
					f.Close()
					t.Fatalf("Create(%s) succeeded, want %q", tc.path, tc.want)
				}
				if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
					t.Errorf("Create(%s) = %v, want an error naming the path and saying %q", tc.path, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create(%s): %v", tc.path, err)
			}
			defer f.Close()
			if _, err := f.WriteString("spans"); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(tc.path); string(b) != "spans" {
				t.Errorf("%s holds %q after the write, want %q", tc.path, b, "spans")
			}
		})
	}
	if b, _ := os.ReadFile(precious); string(b) != "keep me" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	// The null device is the one device an output may be: spans counted, not kept.
	if f, err := Create("/dev/null"); err != nil {
		t.Errorf("Create(/dev/null): %v", err)
	} else if _, err := f.WriteString("spans"); err != nil {
		t.Errorf("writing to /dev/null: %v", err)
	} else {
		f.Close()
	}
	if b, _ := os.ReadFile(hard); string(b) != "linked" {
		t.Errorf("the hard-linked file was written: %q", b)
	}
	st, err := os.Stat(filepath.Join(dir, "new.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm&^OutputMode != 0 {
		t.Errorf("new output file mode %v, want at most %v", perm, os.FileMode(OutputMode))
	}
}

// TestCheckExistingOwner: another user's file is not truncated (the test
// pretends to run as another uid: no root needed).
func TestCheckExistingOwner(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	uid := int(st.Sys().(*syscall.Stat_t).Uid)
	if err := checkExisting(p, st, uid); err != nil {
		t.Errorf("own file refused: %v", err)
	}
	err = checkExisting(p, st, uid+1)
	if want := "owned by uid " + strconv.Itoa(uid); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checkExisting as uid %d = %v, want %q", uid+1, err, want)
	}
}

// nobody is the unprivileged user that plants links in TestCreateAsRoot.
const nobody = 65534

// TestCreateAsRoot: an unprivileged user plants a symbolic link to a file
// of root's, and a file of its own, in a sticky directory anyone may write
// (a /tmp); root's Create writes through neither.
func TestCreateAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: an unprivileged user plants links for root to follow")
	}
	sticky, err := os.MkdirTemp("", "specprobe-sticky-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sticky) })
	if err := os.Chmod(sticky, 0o1777); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(precious, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(sticky, "spans.jsonl")
	theirs := filepath.Join(sticky, "trace.json")
	plant := exec.Command("sh", "-c", `ln -s "$1" "$2" && echo planted > "$3"`, "sh", precious, link, theirs)
	plant.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if out, err := plant.CombinedOutput(); err != nil {
		t.Fatalf("planting as uid %d: %v\n%s", nobody, err, out)
	}
	if f, err := Create(link); err == nil {
		f.Close()
		t.Errorf("Create(%s) followed the planted symlink", link)
	} else if !strings.Contains(err.Error(), "refusing to write through a symlink") {
		t.Errorf("Create(%s) = %v, want a symlink refusal", link, err)
	} else {
		t.Log(err)
	}
	if f, err := Create(theirs); err == nil {
		f.Close()
		t.Errorf("Create(%s) truncated uid %d's file", theirs, nobody)
	} else if !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("Create(%s) = %v, want an owner refusal", theirs, err)
	}
	if b, _ := os.ReadFile(precious); string(b) != "root's" {
		t.Errorf("root's file now holds %q", b)
	}
	if b, _ := os.ReadFile(theirs); string(b) != "planted\n" {
		t.Errorf("the user's file now holds %q", b)
	}
}
