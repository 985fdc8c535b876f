package loader

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Capability bits (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// CheckPrivileges names the capabilities that are missing before anything is
// loaded, rather than leaving the user with a bare EPERM.
func CheckPrivileges() error {
	eff, err := effectiveCaps()
	if err != nil {
		return nil // can't tell: let the kernel decide
	}
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if has(capSysAdmin) {
		return nil
	}
	if has(capBPF) && has(capPerfmon) {
		return perfAllowed()
	}
	var missing []string
	if !has(capBPF) {
		missing = append(missing, "CAP_BPF")
	}
	if !has(capPerfmon) {
		missing = append(missing, "CAP_PERFMON")
	}
	return fmt.Errorf("missing privileges: specprobe needs %s (or CAP_SYS_ADMIN) to load BPF programs and attach uprobes; run it with sudo or grant them: setcap cap_bpf,cap_perfmon+ep $(which specprobe)",
		strings.Join(missing, " and "))
}

func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapEff in /proc/self/status")
}

// perfAllowed tells whether this process may open perf events (uprobes on
// kernels without uprobe_multi, and every watchpoint): Debian's kernels
// carry a patch that, at kernel.perf_event_paranoid 3 (their default),
// refuses perf_event_open to all but CAP_SYS_ADMIN; CAP_PERFMON is not
// enough there (measured on Debian's 6.1 and 6.12). A software event of
// this thread, opened and closed, asks the kernel itself.
func perfAllowed() error {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_DUMMY,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:   unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		unix.Close(fd)
		return nil
	}
	paranoid := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil {
		paranoid = strings.TrimSpace(string(b))
	}
	if denied(err) {
		return fmt.Errorf("this kernel refuses perf events to a process without CAP_SYS_ADMIN at kernel.perf_event_paranoid %s "+
			"(Debian's kernels do at 3, their default; CAP_PERFMON is not enough there): "+
			"set sysctl kernel.perf_event_paranoid=2, or grant CAP_SYS_ADMIN: %w", paranoid, err)
	}
	return fmt.Errorf("perf_event_open: %w", err)
}

// uprobeDenied explains a perf-event uprobe refused for want of privilege:
// a kernel without uprobe_multi links (before 6.6) creates each uprobe as a
// perf event, which Linux allows only with CAP_SYS_ADMIN since 2025's fix
// "perf: Require CAP_SYS_ADMIN for uprobes", backported to the stable lines
// (Debian's 6.1.176 has it: refused with CAP_PERFMON, measured).
func uprobeDenied(err error) error {
	if !denied(err) || hasSysAdmin() {
		return err
	}
	return fmt.Errorf("%w: this kernel has no uprobe_multi links (6.6+) and makes each uprobe a perf event, "+
		"which Linux allows only with CAP_SYS_ADMIN: grant CAP_SYS_ADMIN to trace native stages on it (Python stages need no more than CAP_PERFMON)", err)
}

func denied(err error) bool { return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) }

// hasSysAdmin tells whether this process holds CAP_SYS_ADMIN (false where
// it cannot tell: the kernel then decides).
func hasSysAdmin() bool {
	eff, err := effectiveCaps()
	return err == nil && eff&(1<<capSysAdmin) != 0
}
