package loader

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/bpfring"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/spanbuilder"
)

// Options tune how probes are armed.
type Options struct {
	SkipEndbr   bool // probe after a leading endbr64 (default in the CLI)
	RingBytes   uint32
	WakeupBytes uint64
	NoMulti     bool // one perf-event link per site even where uprobe_multi exists
	// BenchOmit leaves parts of the stage programs out (bpf/stage.c's
	// OMIT_*), for bench/probecost's part-by-part costs only.
	BenchOmit uint32
	// CUDA, when set, arms the probes on the CUDA driver (FindCUDA), and
	// every stage boundary's record carries the thread's counters;
	// CUDALaunches counts kernel and graph launches too.
	CUDA         *CUDATarget
	CUDALaunches bool
	// NoKeptReturn leaves kept_return (keptarm.go) unarmed: attach's
	// --kept-frames=false, and bench/pywatch's side-by-side cost.
	NoKeptReturn bool
	// Python says the session will arm Python stages (ArmPython): without
	// it the watchpoint programs and maps are loaded as stubs (pythonless).
	Python bool
}

// Session is a set of armed probes on one process.
type Session struct {
	PID       int
	Targets   []Target
	PyTargets []PyTarget
	Multi     bool
	objs      bpf.StageObjects
	links     []link.Link
	reader    *bpfring.Reader
	closed    bool
	values    [][2][]probes.Named // per site and boundary, in the order BPF reads them
	Stats     ReadStats
	watches   []*Watch
	// hits classifies watchpoint hits; py joins the values read at a
	// Python call's pop; pending holds events made while decoding another
	// record (a call whose payload was cut), handed on after it.
	hits    *watchDecoder
	py      *pyAssembler
	pending []spanbuilder.Event
	// The compiled reads of each Python site (pycompile.go); a site without
	// one is read from user space, if at all.
	programs map[uint32]*PyProgram
	// dropNotes counts, per thread, events lost (hits that said so,
	// records the ring stepped over) until an event of the thread carries
	// the count (Event.Dropped).
	dropNotes map[uint32]uint32
	// KeptFrames says how the end of a Python call whose frame outlives
	// it is seen (3.10, 3.11; keptarm.go), "" where that needs nothing.
	KeptFrames string
	opts       Options
	kept       *keptObjects // loaded for a Python 3.10 or 3.11 target (keptarm.go)
	// OnCodeFreed, when set, is called (from Run's goroutine) when a
	// watched Python code object is freed.
	OnCodeFreed func(site int)
}

// Attach arms entry and exit probes on every target, restricted to pid.
func Attach(pid int, targets []Target, opts Options) (*Session, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}
	spec, err := sessionSpec(opts)
	if err != nil {
		return nil, err
	}
	s := &Session{PID: pid, Targets: targets, hits: newWatchDecoder(nil), programs: map[uint32]*PyProgram{}}
	s.py = newPyAssembler(func(site uint32) int {
		if p := s.programs[site]; p != nil {
			return len(p.Fields)
		}
		return 0
	})
	for _, t := range targets {
		s.values = append(s.values, t.Stage.Boundaries())
	}
	if err := loadCollection(spec, &s.objs, nil); err != nil {
		return nil, err
	}
	if err := s.configure(); err != nil {
		s.Close()
		return nil, err
	}
	s.Multi = !opts.NoMulti && features.HaveBPFLinkUprobeMulti() == nil
	s.opts = opts
	if err := s.arm(); err != nil {
		s.Close()
		return nil, err
	}
	if opts.CUDA != nil {
		if err := s.armCUDA(opts.CUDA, opts.CUDALaunches); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.reader, err = bpfring.NewReader(s.objs.Events)
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// sessionSpec is the stage collection as a session with opts loads it: the
// one place its constants and sizes are set, so VerifyPrograms loads what
// attach loads.
func sessionSpec(opts Options) (*ebpf.CollectionSpec, error) {
	spec, err := stageSpec()
	if err != nil {
		return nil, err
	}
	return spec, configureSpec(spec, opts)
}

// configureSpec sets spec's constants and sizes for opts: stage.c's, or
// kept.c's, whose maps must match the session's to be replaced by them.
func configureSpec(spec *ebpf.CollectionSpec, opts Options) error {
	if opts.RingBytes > 0 {
		spec.Maps["events"].MaxEntries = opts.RingBytes
	}
	if opts.WakeupBytes > 0 {
		if opts.WakeupBytes&(opts.WakeupBytes-1) != 0 {
			return fmt.Errorf("wakeup bytes %d: want a power of 2", opts.WakeupBytes)
		}
		if err := spec.Variables["wakeup_bytes"].Set(opts.WakeupBytes); err != nil {
			return err
		}
	}
	if opts.BenchOmit != 0 {
		if err := spec.Variables["bench_omit"].Set(opts.BenchOmit); err != nil {
			return err
		}
	}
	if !opts.Python {
		pythonless(spec)
	}
	if opts.CUDA != nil {
		return spec.Variables["cuda_on"].Set(uint32(1))
	}
	// An LRU hash is allocated whole at load, and charged to the daemon's
	// memory cgroup: a target without CUDA gets one entry, not the 16384
	// threads' worth (~2 MiB) of one that has it.
	spec.Maps["cuda_threads"].MaxEntries = 1
	return nil
}

// pythonless makes spec's watchpoint programs stubs and its Python maps one
// entry long, for a session with no Python stage. Both are paid at load,
// to the daemon's memory cgroup, whether used or not: watch_fields' verifier
// run charged it 14 MiB more while it ran (20 MiB in all, against 1 MiB for
// the stage programs), and the Python maps: pyprogs, an array allocated
// whole, and the bucket arrays of tstates and exc_slots, sized by their
// max_entries (their entries come with threads).
func pythonless(spec *ebpf.CollectionSpec) {
	for _, name := range []string{"watch_hit", "watch_fields"} {
		p := spec.Programs[name]
		p.Instructions = asm.Instructions{asm.Mov.Imm(asm.R0, 0).WithSymbol(name), asm.Return()}
	}
	for _, name := range []string{"tstates", "exc_slots", "pyprogs"} {
		spec.Maps[name].MaxEntries = 1
	}
}

// loads lets two collections load at a time in this process. The
// verifier's working memory is charged to the loader's memory cgroup until
// the load ends (20 MiB for a Python session's collection): 16 daemon
// sessions attaching together took the DaemonSet's 256 MiB container past
// its limit, and the kernel killed the daemon. Two at a time bound it to
// 40 MiB; the verifier works on one core a load, and the DaemonSet's half a
// core would not run more any faster.
var loads = make(chan struct{}, 2)

// loadCollection is spec.LoadAndAssign(to, opts), within loads.
func loadCollection(spec *ebpf.CollectionSpec, to any, opts *ebpf.CollectionOptions) error {
	loads <- struct{}{}
	defer func() { <-loads }()
	if err := spec.LoadAndAssign(to, opts); err != nil {
		return verifierError(err)
	}
	return nil
}

func explainLoadError(err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("this kernel lacks a BPF feature specprobe needs (BTF, ring buffers, BPF cookies: Linux 6.1+): %w", err)
	}
	if strings.Contains(err.Error(), "operation not permitted") {
		return fmt.Errorf("loading BPF programs was refused: run as root or grant CAP_BPF and CAP_PERFMON: %w", err)
	}
	return fmt.Errorf("loading BPF programs: %w", err)
}

// configure writes, for each site and boundary, what the BPF program reads.
func (s *Session) configure() error {
	for i, t := range s.Targets {
		for b, vals := range t.Stage.Boundaries() {
			var cfg bpf.StageSiteConfig
			cfg.Nvalues = uint32(len(vals))
			for j, nv := range vals {
				v := nv.Value
				spec := &cfg.Values[j]
				spec.Source = uint8(v.From)
				spec.Type = uint8(v.Type)
				spec.Size = uint8(v.Size)
				spec.ElemSize = uint32(v.ElemSize)
				spec.Nderef = uint8(len(v.Deref))
				copy(spec.Deref[:], v.Deref)
				if v.Type == probes.TypeString {
					cfg.Str = 1
				}
			}
			if err := s.objs.Sites.Put(uint32(i*2+b), &cfg); err != nil {
				return fmt.Errorf("configuring site %d: %w", i, err)
			}
		}
	}
	return nil
}

// arm attaches one uprobe_multi link per file and direction where the kernel
// has them (they detach in one step), else one perf-event link per site.
func (s *Session) arm() error {
	byFile := map[string][]int{}
	var files []string
	for i, t := range s.Targets {
		if _, ok := byFile[t.File.Open]; !ok {
			files = append(files, t.File.Open)
		}
		byFile[t.File.Open] = append(byFile[t.File.Open], i)
	}
	for _, path := range files {
		idx := byFile[path]
		if err := s.armFile(s.Targets[idx[0]].File, path, idx); err != nil {
			return err
		}
	}
	return nil
}

// armFile attaches the probes of one file, exit probes first: a call that
// begins between the two attaches shows an exit without an entry, which
// the span builder counts and drops, never an entry whose exit never comes
// (a uretprobe takes a call's return at its entry, so one armed second
// would miss the exits of calls entered in between). The kernel gets the
// file opened and checked here (Mapping.executable).
func (s *Session) armFile(m Mapping, path string, idx []int) error {
	ex, done, err := m.executable()
	if err != nil {
		return err
	}
	defer done()
	if s.Multi {
		opts := &link.UprobeMultiOptions{PID: uint32(s.PID)}
		for _, i := range idx {
			opts.Addresses = append(opts.Addresses, s.Targets[i].Offset)
			opts.Cookies = append(opts.Cookies, uint64(i))
		}
		if err := s.add(ex.UretprobeMulti(nil, s.objs.StageExitMulti, opts)); err != nil {
			return fmt.Errorf("attaching exit probes to %s: %w", path, err)
		}
		if err := s.add(ex.UprobeMulti(nil, s.objs.StageEntryMulti, opts)); err != nil {
			return fmt.Errorf("attaching entry probes to %s: %w", path, err)
		}
		return nil
	}
	for _, i := range idx {
		t := s.Targets[i]
		opts := &link.UprobeOptions{Address: t.Offset, PID: s.PID, Cookie: uint64(i)}
		if err := s.add(ex.Uretprobe(t.Symbol.Name, s.objs.StageExit, opts)); err != nil {
			return fmt.Errorf("attaching the exit probe of %s: %w", t.Symbol.Demangled, err)
		}
		if err := s.add(ex.Uprobe(t.Symbol.Name, s.objs.StageEntry, opts)); err != nil {
			return fmt.Errorf("attaching the entry probe of %s: %w", t.Symbol.Demangled, err)
		}
	}
	return nil
}

func (s *Session) add(l link.Link, err error) error {
	if err != nil && !s.Multi {
		return uprobeDenied(err) // a perf-event uprobe
	}
	if err != nil {
		return err
	}
	s.links = append(s.links, l)
	return nil
}

// Drops counts events lost: the BPF side could not queue them (the ring was
// full), or queued them and never committed them (bpfring.Reader.Stuck).
func (s *Session) Drops() uint64 {
	var per []uint64
	if err := s.objs.Drops.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	n := s.reader.Stuck()
	for _, x := range per {
		n += x
	}
	return n
}

// Close detaches every probe and frees the programs and maps. Safe to call twice.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, w := range s.watches {
		s.DisarmWatch(w)
	}
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	if s.kept != nil {
		errs = append(errs, s.kept.Close())
	}
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// ProgramRuntime is the time the native stage programs ran and how often,
// from the kernel's BPF statistics (zero unless they are enabled:
// kernel.bpf_stats_enabled, or ebpf.EnableStats). bench/probecost reads it.
func (s *Session) ProgramRuntime() (runs uint64, total time.Duration) {
	for _, p := range []*ebpf.Program{s.objs.StageEntryMulti, s.objs.StageExitMulti, s.objs.StageEntry, s.objs.StageExit} {
		if st, err := p.Stats(); err == nil {
			runs += st.RunCount
			total += st.Runtime
		}
	}
	return runs, total
}
