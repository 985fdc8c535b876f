package loader

import (
	"sync"

	"github.com/cilium/ebpf"

	"github.com/specprobe/specprobe/bpf"
)

type parsedSpec struct {
	once sync.Once
	spec *ebpf.CollectionSpec
	err  error
}

var stageParsed, keptParsed parsedSpec

// copySpec is p's spec, parsed by load once per process, copied.
func (p *parsedSpec) copySpec(load func() (*ebpf.CollectionSpec, error)) (*ebpf.CollectionSpec, error) {
	p.once.Do(func() { p.spec, p.err = load() })
	if p.err != nil {
		return nil, p.err
	}
	return p.spec.Copy(), nil
}

// stageSpec is the stage object's collection spec, parsed once per process
// and copied for each session (a session changes its copy: ring size,
// constants). Parsing the ELF and its BTF each time cost every daemon
// session megabytes of garbage at once: 16 targets found together then
// pushed the daemon against its Go memory limit, and the sessions stalled.
func stageSpec() (*ebpf.CollectionSpec, error) { return stageParsed.copySpec(bpf.LoadStage) }

// keptSpec is kept.c's (keptarm.go), likewise.
func keptSpec() (*ebpf.CollectionSpec, error) { return keptParsed.copySpec(bpf.LoadKept) }
