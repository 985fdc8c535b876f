package procfs

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseMapLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Map
	}{
		{"7f1c2a000000-7f1c2a1d5000 r-xp 00028000 fd:01 1314 /usr/lib/x86_64-linux-gnu/libc.so.6",
			Map{Start: 0x7f1c2a000000, End: 0x7f1c2a1d5000, Perms: "r-xp", Offset: 0x28000, Major: 0xfd, Minor: 1, Inode: 1314, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"}},
		// The kernel pads to a column; the path keeps its own spaces.
		{"00400000-00401000 r-xp 00000000 08:02 77                                 /opt/my  server/bin/llama server",
			Map{Start: 0x400000, End: 0x401000, Perms: "r-xp", Major: 8, Minor: 2, Inode: 77, Path: "/opt/my  server/bin/llama server"}},
		{"00400000-00401000 r-xp 00000000 08:02 77 /tmp/x (deleted)",
			Map{Start: 0x400000, End: 0x401000, Perms: "r-xp", Major: 8, Minor: 2, Inode: 77, Path: "/tmp/x", Deleted: true}},
		{"55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]",
			Map{Start: 0x55d0c0a00000, End: 0x55d0c0a21000, Perms: "rw-p", Path: "[heap]"}},
		{"7ffd1000-7ffd2000 rw-p 00000000 00:00 0",
			Map{Start: 0x7ffd1000, End: 0x7ffd2000, Perms: "rw-p"}},
		// Not a file: a pseudo-mapping's name is left alone.
		{"7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [anon: x (deleted)]",
			Map{Start: 0x7ffd1000, End: 0x7ffd2000, Perms: "rw-p", Path: "[anon: x (deleted)]"}},
	} {
		got, err := ParseMapLine(tc.line)
		if err != nil || got != tc.want {
			t.Errorf("ParseMapLine(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
	for _, line := range []string{
		"", "garbage", "1000 r-xp 0 08:02 1 /x", "2000-1000 r-xp 0 08:02 1 /x", "1000-2000 r-x 0 08:02 1 /x",
		"1000-2000 r-xp zz 08:02 1 /x", "1000-2000 r-xp 0 0802 1 /x", "1000-2000 r-xp 0 08:02 -1 /x",
	} {
		if m, err := ParseMapLine(line); err == nil {
			t.Errorf("ParseMapLine(%q) = %+v, want an error", line, m)
		}
	}
}

func TestParseMapsBounds(t *testing.T) {
	long := "1000-2000 r-xp 00000000 08:02 1 /" + strings.Repeat("a", maxMapLine) + "\n"
	if err := ParseMaps(strings.NewReader(long), func(Map) bool { return true }); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a line past %d bytes: %v, want an error", maxMapLine, err)
	}
	text := "1000-2000 r-xp 00000000 08:02 1 /a\n3000-4000 r--p 00000000 08:02 2 /b\n5000-6000 r-xp 00000000 08:02 3 /c"
	var paths []string
	err := ParseMaps(strings.NewReader(text), func(m Map) bool { paths = append(paths, m.Path); return len(paths) < 2 })
	if err != nil || !slices.Equal(paths, []string{"/a", "/b"}) {
		t.Errorf("stopping after two: %v %v", paths, err)
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and a ')' (a process may name itself so).
	line := "4242 (evil) Z (x) S 1 4242 4242 0 -1 2097216 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0\n"
	s, err := ParseStat(line)
	if err != nil || s.Comm != "evil) Z (x" || s.State != 'S' || s.PPID != 1 || s.Start != 98765 || !s.Kernel() || s.Zombie() {
		t.Errorf("ParseStat = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "4242 evil S 1", "4242 (x) S 1 2 3", "4242 (x) SS 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0"} {
		if _, err := ParseStat(bad); err == nil {
			t.Errorf("ParseStat(%q): no error", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	s, err := ParseStatus("Name:\tpython3\nUid:\t1000\t1001\t1000\t1000\nNSpid:\t5123\t7\n")
	if err != nil || s.UID != 1000 || s.EUID != 1001 || !slices.Equal(s.NSpid, []int{5123, 7}) {
		t.Errorf("ParseStatus = %+v, %v", s, err)
	}
	if _, err := ParseStatus("Uid:\tx\n"); err == nil {
		t.Error("bad Uid line: no error")
	}
}

// TestSelf reads this test process.
func TestSelf(t *testing.T) {
	pid := os.Getpid()
	var exec []Map
	if err := Maps(pid, func(m Map) bool {
		if m.Exec() && m.IsFile() {
			exec = append(exec, m)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	if !slices.ContainsFunc(exec, func(m Map) bool { return m.Path == self }) {
		t.Errorf("own executable %s not among the executable mappings %+v", self, exec)
	}
	st, err := ReadStat(pid)
	if err != nil || st.State == 'Z' || st.Kernel() || st.PPID != os.Getppid() {
		t.Errorf("ReadStat(self) = %+v, %v", st, err)
	}
	tids, err := Tasks(pid)
	if err != nil || !slices.Contains(tids, pid) {
		t.Errorf("Tasks(self) = %v, %v", tids, err)
	}
	args, err := Cmdline(pid)
	if err != nil || !slices.Equal(args, os.Args) {
		t.Errorf("Cmdline(self) = %q, %v; want %q", args, err, os.Args)
	}
	if ExeName(pid) == "" {
		t.Error("ExeName(self) empty")
	}
	if _, err := ReadStat(MaxPID + 1); err == nil {
		t.Error("ReadStat of a PID past the limit: no error")
	}
}

func TestLabel(t *testing.T) {
	for _, tc := range []struct{ exe, comm, want string }{
		{"python3.12", "sglang::schedul", "python3.12"},
		{"", "systemd", "systemd"}, // an exe link we may not read: a container's PID 1
		{"", "  ", "unknown"},
		{"", "", "unknown"},
	} {
		if got := label(tc.exe, tc.comm); got != tc.want {
			t.Errorf("label(%q, %q) = %q, want %q", tc.exe, tc.comm, got, tc.want)
		}
	}
	if got := Label(1); got == "" {
		t.Error("Label(1) is empty")
	}
	if got := Label(1 << 30); got != "unknown" {
		t.Errorf("Label of no process = %q, want unknown", got)
	}
}
