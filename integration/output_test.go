package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody plants the links of TestOutputSymlink.
const nobody = 65534

// stickyDir is a directory anyone may write, sticky as /tmp is.
func stickyDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "specprobe-sticky-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plantAs runs sh -c script as uid, with args as $1...
func plantAs(t *testing.T, uid int, script string, args ...string) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid %d: %s: %v\n%s", uid, script, err, out)
	}
}

// TestOutputSymlink: an unprivileged user plants a symbolic link to a file
// of root's at each output path, in a sticky directory: attach's file
// exporters and the daemon's output refuse it, exit non-zero with the
// reason, and the file is unchanged. Nothing is attached (the output is
// opened first).
func TestOutputSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: an unprivileged user plants links for root to follow")
	}
	dir := stickyDir(t)
	precious := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(precious, []byte("root's file"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "spans.out")
	plantAs(t, nobody, `ln -s "$1" "$2"`, precious, link)
	config := filepath.Join(t.TempDir(), "daemon.yaml")
	if err := os.WriteFile(config, []byte("listen: 127.0.0.1:0\nexporters: [perfetto]\noutput: "+link+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDemo(t, demoBinary(t, "specdemo-cet"))
	pid := itoa(d.cmd.Process.Pid)
	for _, args := range [][]string{
		{"attach", "--pid", pid, "--engine", "demo", "--exporter", "otlp-file=" + link},
		{"attach", "--pid", pid, "--engine", "demo", "--exporter", "perfetto=" + link},
		{"attach", "--pid", pid, "--engine", "demo", "--exporter", "otlp-file", "--output", link},
		{"daemon", "--listen", "127.0.0.1:0", "--engine", "demo", "--exporter", "otlp-file", "--output", link},
		{"daemon", "--config", config, "--engine", "demo"},
	} {
		code, out := cli(t, nil, args...)
		if code == 0 || !strings.Contains(out, link) || !strings.Contains(out, "refusing to write through a symlink") {
			t.Errorf("specprobe %v: exit %d; want non-zero and the path refused as a symlink:\n%s", args, code, out)
		}
		if strings.Contains(out, "attached to PID") {
			t.Errorf("specprobe %v attached before refusing its output:\n%s", args, out)
		}
		if b, _ := os.ReadFile(precious); string(b) != "root's file" {
			t.Fatalf("specprobe %v wrote through the link: root's file holds %q", args, b)
		}
	}
	// A file of the user's own at the output path is not truncated either.
	theirs := filepath.Join(dir, "trace.json")
	plantAs(t, nobody, `echo theirs > "$1"`, theirs)
	code, out := cli(t, nil, "attach", "--pid", pid, "--engine", "demo", "--exporter", "perfetto="+theirs)
	if code == 0 || !strings.Contains(out, "owned by uid 65534") {
		t.Errorf("attach onto uid %d's file: exit %d:\n%s", nobody, code, out)
	}
	if b, _ := os.ReadFile(theirs); string(b) != "theirs\n" {
		t.Errorf("the user's file now holds %q", b)
	}
}

// failedRe reads an exporter's summary line.
var failedRe = regexp.MustCompile(`exporter (\S+): (\d+) spans exported, (\d+) dropped \(queue full or flush timeout\), (\d+) failed(; first error: (.*))?`)

// TestOutputWriteErrors: an output that cannot be written fails the run.
// /dev/full is refused at the start (a device is not an output file); a
// file past the size limit (RLIMIT_FSIZE: writes fail with EFBIG, as on a
// full disk) makes attach count every span it could not write as failed,
// name the first error, and exit non-zero, for otlp-file (written per
// batch) and perfetto (written at the end).
func TestOutputWriteErrors(t *testing.T) {
	needRoot(t)
	d := startDemo(t, demoBinary(t, "specdemo-cet"))
	code, out := cli(t, nil, "attach", "--pid", itoa(d.cmd.Process.Pid), "--engine", "demo", "--exporter", "otlp-file=/dev/full")
	if code == 0 || !strings.Contains(out, "/dev/full is a character device") {
		t.Errorf("otlp-file=/dev/full: exit %d, want non-zero and the device refused:\n%s", code, out)
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not installed: cannot limit the output file's size")
	}
	for _, kind := range []string{"otlp-file", "perfetto"} {
		t.Run(kind, func(t *testing.T) {
			d := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "6")
			path := filepath.Join(t.TempDir(), "out")
			code, out := attachCLIAs(t, d, []string{prlimit, "--fsize=1024", "--"}, nil, "--engine", "demo", "--exporter", kind+"="+path)
			waitExit(t, d, 0)
			if code == 0 {
				t.Errorf("exit 0 with the output file past its size limit:\n%s", out)
			}
			m := failedRe.FindStringSubmatch(out)
			if m == nil || m[1] != kind {
				t.Fatalf("no summary line for %s:\n%s", kind, out)
			}
			exported, _ := strconv.Atoi(m[2])
			failed, _ := strconv.Atoi(m[4])
			if failed == 0 || exported != 0 && kind == "perfetto" {
				t.Errorf("%d exported, %d failed: want the spans not written counted failed:\n%s", exported, failed, out)
			}
			if !strings.Contains(m[6], "file too large") {
				t.Errorf("first error %q, want the write's: file too large", m[6])
			}
			if want := fmt.Sprintf("exporter %s: %d spans not written", kind, failed); !strings.Contains(out, want) {
				t.Errorf("the error lacks %q:\n%s", want, out)
			}
		})
	}
}

// TestDaemonOutputWriteError: the daemon whose output file cannot be
// written (past RLIMIT_FSIZE) logs the failure with the session's detach
// and exits non-zero at SIGTERM, every probe gone.
func TestDaemonOutputWriteError(t *testing.T) {
	needRoot(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not installed: cannot limit the output file's size")
	}
	path := filepath.Join(t.TempDir(), "spans.jsonl")
	d := startDaemonAs(t, []string{prlimit, "--fsize=1024", "--"}, nil,
		"--exporter", "otlp-file", "--output", path, "--engine", "demo", "--metrics-exporter", "none")
	target := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "6")
	pid := target.cmd.Process.Pid
	d.waitFor(t, fmt.Sprintf("PID %d attached", pid), func() bool { return d.attached(pid) })
	target.release(t)
	waitExit(t, target, 0)
	d.waitFor(t, "the detach", func() bool { return d.metric("specprobe_daemon_detaches_total") == 1 })
	if f := d.metric("specprobe_spans_failed_total"); f == 0 {
		t.Errorf("no failed span counted on /metrics")
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	code := d.wait(t, machineTime(30*time.Second))
	out := d.out.String()
	if code == 0 {
		t.Errorf("daemon exit 0 after failing to write its output:\n%s", out)
	}
	if want := "spans not written: write " + path + ": file too large"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	assertNoProbesLeft(t)
}
