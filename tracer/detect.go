package tracer

import (
	"fmt"
	"strings"

	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/procgroup"
	"github.com/specprobe/specprobe/pyproc"
)

// Detect picks the catalog spec for pid, as attach does without --engine:
// from the process and the other processes of its server
// (probes.DetectServer); python names its interpreter for the message ("").
// anyRank takes the process whatever its rank (attach --any-rank).
func Detect(specs []*probes.Spec, pid int, anyRank bool) (spec *probes.Spec, python string, err error) {
	proc, python, done := detectable(pid)
	defer done()
	proc.AnyRank = anyRank
	var others []probes.Process
	if server, ok := procgroup.Find(&procgroup.Kernel{}, pid); ok {
		for _, p := range server.Procs {
			if p.PID != pid && p.Titled {
				o, _, done := detectable(p.PID)
				defer done()
				others = append(others, o)
			}
		}
	}
	spec, err = probes.DetectServer(specs, proc, others)
	return spec, python, err
}

// detectable is what detection reads of pid; done releases it.
func detectable(pid int) (proc probes.Process, python string, done func()) {
	var libs []string
	if maps, err := loader.Mappings(pid); err == nil {
		for _, m := range maps {
			libs = append(libs, m.Path)
		}
	}
	args, _ := procfs.Cmdline(pid)
	proc = probes.Process{Exe: loader.Exe(pid), Cmdline: strings.TrimSpace(strings.Join(args, " ")), Title: probes.Title(args), Mapped: libs}
	py, err := pyproc.Attach(pid)
	if err != nil {
		return proc, "", func() {}
	}
	proc.HasModule = func(m string) bool { ok, _ := py.HasModule(m); return ok }
	return proc, fmt.Sprintf(", python %s", py.Version()), func() { py.Close() }
}
