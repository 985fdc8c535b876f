package loader

import (
	"sync"

	"github.com/cilium/ebpf"

	"github.com/specprobe/specprobe/bpf"
)

var stageParsed struct {
	once sync.Once
	spec *ebpf.CollectionSpec
	err  error
}

// stageSpec is the stage object's collection spec, parsed once per process
// and copied for each session (a session changes its copy: ring size,
// constants). Parsing the ELF and its BTF each time cost every daemon
// session megabytes of garbage at once: 16 targets found together then
// pushed the daemon against its Go memory limit, and the sessions stalled.
func stageSpec() (*ebpf.CollectionSpec, error) {
	stageParsed.once.Do(func() { stageParsed.spec, stageParsed.err = bpf.LoadStage() })
	if stageParsed.err != nil {
		return nil, stageParsed.err
	}
	return stageParsed.spec.Copy(), nil
}
