// Package benchprobes arms what the benchmarks (bench/) measure
// specprobe's probes against: the same attach points running empty BPF
// programs. Nothing else uses it.
package benchprobes

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/specprobe/specprobe/bpf"
)

// Load loads the programs a session loads, the empty ones among them.
func Load() (bpf.StageObjects, error) {
	var objs bpf.StageObjects
	if err := rlimit.RemoveMemlock(); err != nil {
		return objs, fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}
	if err := bpf.LoadStageObjects(&objs, nil); err != nil {
		return objs, fmt.Errorf("loading BPF programs (root or CAP_BPF and CAP_PERFMON needed): %w", err)
	}
	return objs, nil
}

// LoadFor is Load with path opened for uprobes.
func LoadFor(path string) (bpf.StageObjects, *link.Executable, error) {
	objs, err := Load()
	if err != nil {
		return objs, nil, err
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		objs.Close()
		return objs, nil, err
	}
	return objs, ex, nil
}

// AttachBare arms an entry and an exit probe that run an empty program at
// offset in path: the baseline `make bench` measures specprobe's probes against.
func AttachBare(path string, offset uint64, pid int, multi bool) (io.Closer, error) {
	objs, ex, err := LoadFor(path)
	if err != nil {
		return nil, err
	}
	b := &bare{objs: objs}
	if multi {
		opts := &link.UprobeMultiOptions{Addresses: []uint64{offset}, PID: uint32(pid)}
		err = b.add(ex.UprobeMulti(nil, objs.BareMulti, opts))
		if err == nil {
			err = b.add(ex.UretprobeMulti(nil, objs.BareMulti, opts))
		}
	} else {
		opts := &link.UprobeOptions{Address: offset, PID: pid}
		err = b.add(ex.Uprobe("bench", objs.Bare, opts))
		if err == nil {
			err = b.add(ex.Uretprobe("bench", objs.Bare, opts))
		}
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Runtime is what ProgramRuntime is for a session: the empty programs'
// run count and time, from the kernel's BPF statistics.
func Runtime(c io.Closer) (runs uint64, total time.Duration) {
	b, ok := c.(*bare)
	if !ok {
		return 0, 0
	}
	for _, p := range []*ebpf.Program{b.objs.Bare, b.objs.BareMulti} {
		if st, err := p.Stats(); err == nil {
			runs += st.RunCount
			total += st.Runtime
		}
	}
	return runs, total
}

type bare struct {
	objs  bpf.StageObjects
	links []link.Link
}

func (b *bare) add(l link.Link, err error) error {
	if err == nil {
		b.links = append(b.links, l)
	}
	return err
}

func (b *bare) Close() error {
	var errs []error
	for _, l := range b.links {
		errs = append(errs, l.Close())
	}
	return errors.Join(append(errs, b.objs.Close())...)
}
