package loader

import (
	"errors"
	"io"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/specprobe/specprobe/bpf"
)

// AttachBare arms an entry and an exit probe that run an empty program at
// offset in path: the baseline `make bench` measures specprobe's probes against.
func AttachBare(path string, offset uint64, pid int, multi bool) (io.Closer, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, err
	}
	var objs bpf.StageObjects
	if err := bpf.LoadStageObjects(&objs, nil); err != nil {
		return nil, explainLoadError(err)
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		objs.Close()
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
