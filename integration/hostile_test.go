package integration

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/export/otlptest"
	"github.com/specprobe/specprobe/internal/testinterp"
)

// The node is hostile: every file, ELF header and byte of process memory
// the daemon reads may be forged by an unprivileged user. TestHostileNode
// runs the daemon as the DaemonSet does (only its four capabilities, its
// memory limit as a memory cgroup, its GOMEMLIMIT) and, one attack at a
// time, an unprivileged user's hostile processes. During each attack a
// real server is started: it must be attached within a second; /healthz
// must never fail; the hostile process must be counted as rejected, by
// reason; and the daemon must end alive, under its limit, never OOM-killed.
func TestHostileNode(t *testing.T) {
	needRoot(t)
	for _, tool := range []string{"setpriv", "gcc", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	limit := daemonSetMemory(t)
	cg := newMemCgroup(t, limit)
	// Already running when the daemon starts, so that its first look sees
	// the forged hashes: a look from the interpreter's start would have
	// checked the hash on keys not forged yet, and then never scans.
	forgedHashes := hostilePython(t, "600000", "64")
	caps := "-all,+bpf,+perfmon,+sys_ptrace,+dac_read_search"
	wrapper := append(cg.wrapper(), "setpriv", "--bounding-set="+caps, "--inh-caps="+caps, "--")
	d := startDaemonAs(t, wrapper, []string{"GOMEMLIMIT=200MiB"},
		"--exporter", "otlp-file=/dev/null", "--metrics-exporter", "none", "--memory-limit", "200MiB")
	if in, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", d.cmd.Process.Pid)); !strings.Contains(string(in), filepath.Base(cg.dir)) {
		t.Fatalf("the daemon is not in the capped cgroup %s: %s", cg.dir, in)
	}
	var unhealthy atomic.Int32
	stopHealth := make(chan struct{})
	healthDone := make(chan struct{})
	go func() { // samples /healthz while the attacks run
		defer close(healthDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopHealth:
				return
			case <-tick.C:
				if code, _ := d.get("/healthz"); code != 200 {
					unhealthy.Add(1)
				}
			}
		}
	}()
	dir := userDir(t)

	attacks := []struct {
		name, reason string
		start        func(t *testing.T) (pids []int)
	}{
		{"forged ELF files", "bad_elf", func(t *testing.T) []int { return forgedELFs(t, dir) }},
		{"600k modules with forged hashes", "dict_too_large", func(t *testing.T) []int { return []int{forgedHashes} }},
		{"cyclic interpreter list", "corrupt_memory", func(t *testing.T) []int { return []int{hostilePython(t, "10", "0", "cycle")} }},
		{"exec loop", "exec_loop", func(t *testing.T) []int { return []int{execLoop(t, dir)} }},
		{"fork and exec storm", "exec_rate", func(t *testing.T) []int { forkStorm(t); return nil }},
		{"symlink swapped under /proc/PID/root", "path_swapped", func(t *testing.T) []int { return []int{coveredInterpreter(t, dir)} }},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			reason := a.reason
			before := d.rejected(reason)
			pids := a.start(t)
			d.waitFor(t, fmt.Sprintf("a %s rejection", reason), func() bool {
				return d.rejected(reason) > before || pids != nil && pids[0] == forgedHashes && d.rejected(reason) > 0
			})
			for _, pid := range pids {
				// Rejected at a look ("not traced (reason)"), or when its
				// session opened the forged file ("could not attach").
				named := regexp.MustCompile(fmt.Sprintf(`(?m)(PID %d \([^)]*\) not traced \(%s\)|could not attach to PID %d )`, pid, reason, pid))
				d.waitFor(t, fmt.Sprintf("PID %d named as not traced", pid), func() bool { return named.MatchString(d.out.String()) })
				line := regexp.MustCompile(named.String() + `.*`).FindString(d.out.String())
				t.Logf("%.300s", line)
			}
			d.realTargetAttaches(t)
		})
	}
	t.Run("FIFO and /dev/zero as inputs", func(t *testing.T) {
		fifo := filepath.Join(dir, "spec.fifo")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"probes", "check", fifo}, {"probes", "check", "/dev/zero"},
			{"daemon", "--config", fifo}, {"daemon", "--config", "/dev/zero"},
			{"daemon", "--probes", fifo}, {"attach", "--pid", "1", "--probes", "/dev/zero"},
		} {
			start := time.Now()
			code, out := cli(t, nil, args...)
			if code == 0 || time.Since(start) > 3*time.Second || !strings.Contains(out, "not a regular file") {
				t.Errorf("specprobe %s: exit %d after %s, want a prompt refusal:\n%s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), out)
			}
		}
		d.realTargetAttaches(t)
	})
	close(stopHealth)
	<-healthDone
	if n := unhealthy.Load(); n > 0 {
		t.Errorf("/healthz failed %d times during the attacks", n)
	}
	if d.exited() || cg.oomKills() > 0 {
		t.Fatalf("daemon died (exited %v, %d OOM kills):\n%s", d.exited(), cg.oomKills(), d.out.String())
	}
	peak := cg.peak()
	t.Logf("daemon memory peak %d MiB of its %d MiB limit", peak>>20, limit>>20)
	if peak > limit {
		t.Errorf("memory peak %d over the limit %d", peak, limit)
	}
	d.stop(t)
}

// daemonSetMemory is the DaemonSet's limits.memory.
func daemonSetMemory(t *testing.T) int64 {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "kubernetes", "specprobe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)limits:.*?memory:\s*(\d+)Mi`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no limits.memory in Mi in the DaemonSet")
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n << 20
}

// userDir is a directory the unprivileged user may use.
func userDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "specprobe-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	return dir
}

// userCopy copies a file of the repository into dir for the unprivileged
// user to run: the checkout may be where that user cannot read (a clone in
// root's mktemp -d, mode 0700).
func userCopy(t *testing.T, dir string, path ...string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(append([]string{repoRoot(t)}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, path[len(path)-1])
	if err := os.WriteFile(dst, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// runAs starts argv as the unprivileged user with a pipe to its stdin,
// waits for "ready" on its stdout when ready is set, and kills it when the
// test ends.
func runAs(t *testing.T, ready bool, argv ...string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	full := asUser(argv...)
	cmd := exec.Command(full[0], full[1:]...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children die with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	if ready {
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			t.Fatalf("%v: %q %v", argv, line, err)
		}
	}
	return cmd, stdin
}

// forgedELFs runs three executables named like interpreters whose section
// headers lie: a 6 GiB .symtab in a sparse file, section headers cut off,
// two sections on the same bytes. The kernel runs them (it reads only
// program headers); the daemon must refuse to read their symbols.
func forgedELFs(t *testing.T, dir string) []int {
	src := filepath.Join(dir, "idle.c")
	bin := filepath.Join(dir, "idle")
	_ = os.WriteFile(src, []byte("#include <unistd.h>\nint main(void){for(;;)pause();}\n"), 0o644)
	if out, err := exec.Command("gcc", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v %s", err, out)
	}
	base, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	const claimed = 6 << 30
	forged := map[string]func(b []byte) []byte{
		"python3-huge": func(b []byte) []byte {
			sym := sectionHeader(t, b, ".symtab")
			binary.LittleEndian.PutUint64(b[sym+0x18:], uint64(len(b)))         // its bytes at the end...
			binary.LittleEndian.PutUint64(b[sym+0x20:], claimed-uint64(len(b))) // ...6 GiB of them
			return b
		},
		"python3-truncated": func(b []byte) []byte { return b[:binary.LittleEndian.Uint64(b[0x28:])+64] },
		"python3-overlap": func(b []byte) []byte {
			sym, str := sectionHeader(t, b, ".symtab"), sectionHeader(t, b, ".strtab")
			copy(b[str+0x18:str+0x20], b[sym+0x18:sym+0x20])
			return b
		},
	}
	var pids []int
	for name, forge := range forged {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, forge(bytes.Clone(base)), 0o755); err != nil {
			t.Fatal(err)
		}
		if name == "python3-huge" {
			if err := os.Truncate(path, 2*claimed); err != nil { // sparse: no disk used
				t.Fatal(err)
			}
		}
		cmd, _ := runAs(t, false, path)
		pids = append(pids, cmd.Process.Pid)
	}
	return pids
}

// sectionHeader is the offset in an ELF file's bytes of the named section's header.
func sectionHeader(t *testing.T, b []byte, name string) int {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range f.Sections {
		if s.Name == name {
			return int(binary.LittleEndian.Uint64(b[0x28:])) + 64*i
		}
	}
	t.Fatalf("no section %s", name)
	return 0
}

// hostilePython runs pyproc's hostile_modules.py (Debian's python3.11, which
// the unprivileged user can run) with args.
func hostilePython(t *testing.T, args ...string) int {
	script := userCopy(t, userDir(t), "pyproc", "testdata", "hostile_modules.py")
	cmd, _ := runAs(t, true, append([]string{testinterp.Debian311, script}, args...)...)
	return cmd.Process.Pid
}

// execLoop runs a script that execs itself without end (one PID).
func execLoop(t *testing.T, dir string) int {
	script := filepath.Join(dir, "again")
	_ = os.WriteFile(script, []byte("#!/bin/sh\nexec \"$0\" \"$@\"\n"), 0o755)
	cmd, _ := runAs(t, false, script)
	return cmd.Process.Pid
}

// forkStorm forks and execs short-lived processes as fast as a shell can.
func forkStorm(t *testing.T) {
	runAs(t, false, "/bin/sh", "-c", "while :; do /bin/true; done")
}

// coveredInterpreter runs testdata/cover_interpreter.py in a user and mount
// namespace: its interpreter's path becomes a symlink to a decoy copy,
// then it imports SGLang's worker module. The daemon must refuse it
// without ever opening the decoy (watched with inotify).
func coveredInterpreter(t *testing.T, dir string) int {
	py, err := os.ReadFile(testinterp.Debian311)
	if err != nil {
		t.Skip("no /usr/bin/python3.11 for the unprivileged user")
	}
	decoy := filepath.Join(dir, "decoy")
	if err := os.WriteFile(decoy, py, 0o755); err != nil {
		t.Fatal(err)
	}
	mods := filepath.Join(dir, "mods", "sglang", "srt", "speculative")
	if err := os.MkdirAll(mods, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sglang/__init__.py", "sglang/srt/__init__.py", "sglang/srt/speculative/__init__.py", "sglang/srt/speculative/eagle_worker_v2.py"} {
		_ = os.WriteFile(filepath.Join(dir, "mods", f), nil, 0o644)
	}
	watch := watchOpens(t, decoy)
	script := userCopy(t, dir, "integration", "testdata", "cover_interpreter.py")
	cmd, stdin := runAs(t, true, "unshare", "-Urm", testinterp.Debian311, script, decoy, filepath.Join(dir, "mods"))
	_, _ = io.WriteString(stdin, "import\n")
	t.Cleanup(func() {
		if n := watch(); n > 0 {
			t.Errorf("the decoy behind the symlink was opened %d times", n)
		}
	})
	return cmd.Process.Pid
}

// watchOpens counts opens of path from now on; the returned function reads
// the count.
func watchOpens(t *testing.T, path string) func() int {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	opens := 0
	return func() int {
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(fd, buf)
			if n <= 0 || err != nil {
				break
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_OPEN != 0 {
					opens++
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
		return opens
	}
}

// rejected is the daemon's count of processes rejected for reason.
func (d *daemonCLI) rejected(reason string) float64 {
	_, body := d.get("/metrics")
	m := regexp.MustCompile(`(?m)^specprobe_daemon_rejected_total\{[^}]*reason="` + regexp.QuoteMeta(reason) + `"[^}]*\} (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// realTargetAttaches starts a server now and wants it attached within a
// second, then lets it finish and waits for the detach.
func (d *daemonCLI) realTargetAttaches(t *testing.T) {
	t.Helper()
	start := time.Now()
	target := startDemo(t, demoBinary(t, "specdemo-cet"), "--requests", "4")
	pid := target.cmd.Process.Pid
	for !d.attached(pid) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("real target PID %d not attached after 5s:\n%s", pid, d.out.String())
		}
		time.Sleep(5 * time.Millisecond) // polling /targets
	}
	lag := time.Since(start)
	t.Logf("real target attached %s after it started", lag.Round(time.Millisecond))
	if lag > machineTime(time.Second) {
		t.Errorf("real target attached %s after it started, want within %s", lag, machineTime(time.Second))
	}
	target.release(t)
	waitExit(t, target, 0)
	d.waitFor(t, "the real target's detach", func() bool { return !d.listed(pid) })
}

// listed tells whether /targets names pid.
func (d *daemonCLI) listed(pid int) bool {
	_, body := d.get("/targets")
	return strings.Contains(body, fmt.Sprintf(`"pid": %d,`, pid))
}

// TestNoSecretExported: a server started with --api-key=sk-... on its
// command line is traced by the daemon; the secret reaches neither a span
// (nor its resource) nor any line the daemon prints, by default and with
// command_line redacted. With command_line full it is on the resource: the
// check can see it where it is.
func TestNoSecretExported(t *testing.T) {
	needWatchpoints(t)
	py := testinterp.Py312
	if !fileExists(py) {
		t.Skipf("interpreter %s not installed", py)
	}
	const secret = "sk-SECRET-123"
	for _, mode := range []string{"off", "redacted", "full"} {
		t.Run(mode, func(t *testing.T) {
			rcv := &otlptest.Receiver{Protocol: "grpc"}
			rcv.Start(t)
			d := startDaemonCLI(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint(), "OTEL_EXPORTER_OTLP_INSECURE=true"},
				"--exporter", "otlp", "--engine", "sglang", "--metrics-exporter", "none", "--command-line", mode)
			wrapper := filepath.Join(repoRoot(t), "integration", "testdata", "secret_target.py")
			script := filepath.Join(repoRoot(t), "pytargets", "run_sglang.py")
			cmd, _ := launch(t, py, wrapper, script, "--api-key="+secret, "--requests", "4", "--wait-signal")
			pid := cmd.Process.Pid
			d.waitFor(t, fmt.Sprintf("PID %d attached", pid), func() bool { return d.attached(pid) })
			_ = cmd.Process.Signal(syscall.SIGUSR1)
			if code := exitCode(t, cmd); code != 0 {
				t.Fatalf("target exited with %d", code)
			}
			d.waitFor(t, "the detach", func() bool { return !d.listed(pid) })
			spans := rcv.WaitSpans(t, 1, 10*time.Second)
			d.stop(t)
			exported := ""
			for _, r := range rcv.Requests() {
				exported += r.String()
			}
			line, _ := spans[0].ResourceAttr("process.command_line").(string)
			switch mode {
			case "off":
				if line != "" {
					t.Errorf("process.command_line %q exported with command_line off", line)
				}
			case "redacted":
				if !strings.Contains(line, "--api-key=REDACTED") {
					t.Errorf("process.command_line %q: want the flag with its value redacted", line)
				}
			case "full":
				if !strings.Contains(exported, secret) {
					t.Fatalf("command_line full: the secret is not on the spans; the checks below would prove nothing")
				}
				return
			}
			if strings.Contains(exported, secret) {
				t.Errorf("the secret reached the exported spans")
			}
			if strings.Contains(d.out.String(), secret) {
				t.Errorf("the secret reached the daemon's output:\n%s", d.out.String())
			}
		})
	}
}
