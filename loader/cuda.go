package loader

import (
	"debug/elf"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf/link"

	"github.com/specprobe/specprobe/internal/elfsym"
)

// CUDAProbe is one address in the CUDA driver that gets a probe, with every
// exported name that points at it (aliases get one probe, not one each).
type CUDAProbe struct {
	Names  []string
	Offset uint64
	Kind   CUDAKind
}

// CUDATarget is the CUDA driver a process maps and the probes for it.
type CUDATarget struct {
	File   Mapping
	Probes []CUDAProbe
}

// ErrNoCUDA: the process maps no CUDA driver.
var ErrNoCUDA = errors.New("libcuda.so.1 not mapped")

// maxCUDAProbes bounds the addresses probed: the real driver has a few
// dozen matching names; a forged library could have thousands.
const maxCUDAProbes = 256

// FindCUDA finds the CUDA driver among the files pid maps executable and the
// entry points to probe in it, from its own dynamic symbol table.
func FindCUDA(pid int) (*CUDATarget, error) {
	maps, err := Mappings(pid)
	if err != nil {
		return nil, err
	}
	for _, m := range maps {
		if !MatchBinary(m.Path, "libcuda.so") {
			continue
		}
		f, err := m.openELF()
		if err != nil {
			return nil, fmt.Errorf("CUDA driver: %w", err)
		}
		probes, err := cudaProbes(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("CUDA driver %s (mapped by PID %d): %w", m.Path, pid, err)
		}
		if len(probes) == 0 {
			return nil, fmt.Errorf("CUDA driver %s (mapped by PID %d) exports none of the functions specprobe probes (cuStreamSynchronize, cuLaunchKernel, ...)", m.Path, pid)
		}
		return &CUDATarget{File: m, Probes: probes}, nil
	}
	return nil, fmt.Errorf("%w by PID %d", ErrNoCUDA, pid)
}

// cudaProbes lists the exported functions of f to probe, one per address.
func cudaProbes(f *elfsym.File) ([]CUDAProbe, error) {
	byOffset := map[uint64]int{}
	var out []CUDAProbe
	var tooMany bool
	err := f.Symbols(func(s elf.Symbol, dynamic bool) bool {
		bind := elf.ST_BIND(s.Info)
		if !dynamic || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF || (bind != elf.STB_GLOBAL && bind != elf.STB_WEAK) {
			return true
		}
		kind, ok := cudaProbeKind(s.Name)
		if !ok {
			return true
		}
		off, ok := fileOffset(f, s.Value)
		if !ok {
			return true
		}
		if i, seen := byOffset[off]; seen {
			if !slices.Contains(out[i].Names, s.Name) {
				out[i].Names = append(out[i].Names, s.Name)
			}
			return true
		}
		if len(out) >= maxCUDAProbes {
			tooMany = true
			return false
		}
		byOffset[off] = len(out)
		out = append(out, CUDAProbe{Names: []string{s.Name}, Offset: off, Kind: kind})
		return true
	})
	if err != nil {
		return nil, err
	}
	if tooMany {
		return nil, fmt.Errorf("more than %d CUDA entry points to probe: not NVIDIA's driver, or forged", maxCUDAProbes)
	}
	slices.SortFunc(out, func(a, b CUDAProbe) int { return strings.Compare(a.Names[0], b.Names[0]) })
	return out, nil
}

// Describe is one line per kind of probe, for attach's report.
func (c *CUDATarget) Describe(launches bool) []string {
	var lines []string
	for _, k := range []CUDAKind{CUDASync, CUDALaunch, CUDAGraph} {
		if k != CUDASync && !launches {
			continue
		}
		var names []string
		for _, p := range c.Probes {
			if p.Kind == k {
				names = append(names, strings.Join(p.Names, "="))
			}
		}
		if len(names) > 0 {
			lines = append(lines, fmt.Sprintf("%-12s %s", k, strings.Join(names, " ")))
		}
	}
	return lines
}

// armCUDA attaches the CUDA probes: entry and return on the syncs, entry
// on the launches (left out when launches is false). The kernel gets the
// file opened and checked here (Mapping.executable).
func (s *Session) armCUDA(t *CUDATarget, launches bool) error {
	ex, done, err := t.File.executable()
	if err != nil {
		return err
	}
	defer done()
	var syncs, counted []CUDAProbe
	for _, p := range t.Probes {
		switch {
		case p.Kind == CUDASync:
			syncs = append(syncs, p)
		case launches:
			counted = append(counted, p)
		}
	}
	if s.Multi {
		return s.armCUDAMulti(ex, syncs, counted)
	}
	for _, p := range syncs {
		opts := &link.UprobeOptions{Address: p.Offset, PID: s.PID}
		if err := s.add(ex.Uprobe(p.Names[0], s.objs.CudaSyncEntry, opts)); err != nil {
			return fmt.Errorf("attaching to %s in %s: %w", p.Names[0], t.File.Path, err)
		}
		if err := s.add(ex.Uretprobe(p.Names[0], s.objs.CudaSyncExit, opts)); err != nil {
			return fmt.Errorf("attaching to the return of %s in %s: %w", p.Names[0], t.File.Path, err)
		}
	}
	for _, p := range counted {
		opts := &link.UprobeOptions{Address: p.Offset, PID: s.PID, Cookie: cudaCookie(p.Kind)}
		if err := s.add(ex.Uprobe(p.Names[0], s.objs.CudaLaunch, opts)); err != nil {
			return fmt.Errorf("attaching to %s in %s: %w", p.Names[0], t.File.Path, err)
		}
	}
	return nil
}

func (s *Session) armCUDAMulti(ex *link.Executable, syncs, counted []CUDAProbe) error {
	if len(syncs) > 0 {
		opts := &link.UprobeMultiOptions{PID: uint32(s.PID)}
		for _, p := range syncs {
			opts.Addresses = append(opts.Addresses, p.Offset)
		}
		if err := s.add(ex.UprobeMulti(nil, s.objs.CudaSyncEntryMulti, opts)); err != nil {
			return fmt.Errorf("attaching to the CUDA driver's syncs: %w", err)
		}
		if err := s.add(ex.UretprobeMulti(nil, s.objs.CudaSyncExitMulti, opts)); err != nil {
			return fmt.Errorf("attaching to the returns of the CUDA driver's syncs: %w", err)
		}
	}
	if len(counted) > 0 {
		opts := &link.UprobeMultiOptions{PID: uint32(s.PID)}
		for _, p := range counted {
			opts.Addresses = append(opts.Addresses, p.Offset)
			opts.Cookies = append(opts.Cookies, cudaCookie(p.Kind))
		}
		if err := s.add(ex.UprobeMulti(nil, s.objs.CudaLaunchMulti, opts)); err != nil {
			return fmt.Errorf("attaching to the CUDA driver's launches: %w", err)
		}
	}
	return nil
}

// cudaCookie is bpf/cuda.h's CUDA_KERNEL or CUDA_GRAPH.
func cudaCookie(k CUDAKind) uint64 {
	if k == CUDAGraph {
		return 1
	}
	return 0
}
