package loader

import (
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// Check is one thing `specprobe doctor` looked at.
type Check struct {
	Name   string
	OK     bool
	Detail string // what was found, or what fails without it and how to fix it
}

// Doctor checks what attaching needs, without attaching anything.
func Doctor() []Check {
	var out []Check
	add := func(name string, ok bool, detail string) { out = append(out, Check{name, ok, detail}) }

	var u unix.Utsname
	_ = unix.Uname(&u)
	add("kernel", true, unix.ByteSliceToString(u.Release[:])+" "+unix.ByteSliceToString(u.Machine[:]))

	privErr := CheckPrivileges()
	add("privileges", privErr == nil, errText(privErr, "CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) present"))

	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	add("kernel BTF", err == nil, errText(err, "/sys/kernel/btf/vmlinux present"))

	_, err = os.Stat("/sys/bus/event_source/devices/uprobe")
	add("uprobe PMU", err == nil, errText(err, "uprobes can be created with perf_event_open, no tracefs needed"))

	if privErr == nil {
		err = features.HaveMapType(ebpf.RingBuf)
		add("BPF ring buffer", err == nil, errText(err, "supported (5.8+)"))
		err = features.HaveBPFLinkUprobeMulti()
		detail, ok := "supported: one link per file, fast detach", true
		if err != nil {
			detail = "not supported (kernel < 6.6): falling back to one perf-event link per site; works, detaches slower"
			if !hasSysAdmin() {
				detail, ok = "not supported (kernel < 6.6): each uprobe is then a perf event, which needs CAP_SYS_ADMIN: native stages cannot be traced with CAP_BPF and CAP_PERFMON alone (Python stages can)", false
			}
		}
		add("uprobe_multi links", ok, detail)
		err = VerifyPrograms()
		add("BPF programs load", err == nil, errText(err, "the verifier passed every program attach and the daemon load"))
	} else {
		add("BPF features", false, "not checked: needs the privileges above")
	}

	_, err = os.Stat("/sys/bus/event_source/devices/breakpoint")
	add("breakpoint PMU", err == nil, errText(err, "hardware watchpoints available (for Python targets)"))
	if err == nil {
		err = WatchpointsFire()
		add("watchpoints fire", err == nil, errText(err, "a watchpoint armed on a word counted each write to it"))
	}

	if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil {
		v := strings.TrimSpace(string(b))
		add("perf_event_paranoid", true, fmt.Sprintf("%s (root or CAP_PERFMON bypasses it)", v))
	}
	return out
}

func errText(err error, okText string) string {
	if err != nil {
		return err.Error()
	}
	return okText
}
