package loader

import (
	"debug/elf"
	"errors"
	"fmt"
	"reflect"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/pyproc"
)

const keptWhat = "a call whose frame outlives its return (a kept traceback, sys._getframe(), a thread holding sys._current_frames())"

// armKeptReturns puts kept_return on the interpreter of a 3.10 or 3.11
// target (keptreturn.go says why and where). Where it cannot go the target
// is traced all the same: KeptFrames says what is then not seen, for
// attach to print.
func (s *Session) armKeptReturns(proc *pyproc.Process) {
	minor := proc.Version().Minor
	if _, ok := keptFuncs[minor]; !ok {
		return
	}
	if s.opts.NoKeptReturn {
		s.KeptFrames = keptWhat + " is closed when its thread shows it over (cut; withdrawn where its entry was tentative), not at its return: --kept-frames=false"
		return
	}
	m, err := s.interpMapping(proc.Path)
	var k KeptReturn
	if err == nil {
		var ef *elfsym.File
		if ef, err = m.openELF(); err == nil {
			k, err = findKeptReturn(ef, minor)
			ef.Close()
		}
	}
	if err == nil {
		err = s.attachKept(m, k)
	}
	switch {
	case err == nil:
		s.hits.keptDealloc = minor == 11 // see watchDecoder
		s.KeptFrames = fmt.Sprintf("%s is ended at its return, seen at file offset %#x (in %s)", keptWhat, k.Offset, k.Func)
	default:
		s.KeptFrames = fmt.Sprintf("%s is closed when its thread shows it over (cut; withdrawn where its entry was tentative), not at its return: %v", keptWhat, err)
	}
}

// interpMapping is the target's mapping of the interpreter's file.
func (s *Session) interpMapping(path string) (Mapping, error) {
	maps, err := Mappings(s.PID)
	if err != nil {
		return Mapping{}, err
	}
	for _, m := range maps {
		if m.Path == path {
			return m, nil
		}
	}
	return Mapping{}, fmt.Errorf("the interpreter's file %s is not mapped by PID %d", path, s.PID)
}

// attachKept attaches kept_return at k in m's file.
func (s *Session) attachKept(m Mapping, k KeptReturn) error {
	ex, done, err := m.executable()
	if err != nil {
		return err
	}
	defer done()
	if s.kept == nil {
		if s.kept, err = loadKept(&s.objs.StageMaps, s.opts); err != nil {
			return err
		}
	}
	if err := s.kept.KeptCfg.Put(uint32(0), &bpf.StageKeptConfig{Reg: uint32(k.Reg), Enabled: 1}); err != nil {
		return err
	}
	// With an address, the kernel takes no symbol: the name only labels it.
	l, err := ex.Uprobe("kept_return", s.kept.KeptReturn, &link.UprobeOptions{Address: k.Offset, PID: s.PID})
	if err != nil {
		return uprobeDenied(err)
	}
	s.links = append(s.links, l)
	return nil
}

// keptObjects are kept.c's programs loaded on a session's maps. kept_tail
// stays open with them: the kernel empties a program array when its last
// file descriptor closes.
type keptObjects struct {
	KeptReturn *ebpf.Program `ebpf:"kept_return"`
	KeptCfg    *ebpf.Map     `ebpf:"kept_cfg"`
	KeptTail   *ebpf.Map     `ebpf:"kept_tail"`
}

func (k *keptObjects) Close() error {
	return errors.Join(k.KeptReturn.Close(), k.KeptCfg.Close(), k.KeptTail.Close())
}

// loadKept loads kept_return and kept_fields (bpf/kept.c, all of stage.c
// beside them) on maps, the session's: every map of stage.c they use is
// replaced by the session's of that name, so they read the same watches and
// write the same ring buffer. Only kept.c's own maps are new.
func loadKept(maps *bpf.StageMaps, opts Options) (*keptObjects, error) {
	spec, err := keptSpec()
	if err != nil {
		return nil, err
	}
	if err := configureSpec(spec, opts); err != nil {
		return nil, err
	}
	repl := map[string]*ebpf.Map{}
	v := reflect.ValueOf(maps).Elem()
	for i := range v.NumField() {
		if m, ok := v.Field(i).Interface().(*ebpf.Map); ok && m != nil {
			repl[v.Type().Field(i).Tag.Get("ebpf")] = m
		}
	}
	var k keptObjects
	if err := loadCollection(spec, &k, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, err
	}
	return &k, nil
}

// vaddrOf is the address the file gives what lies at file offset off.
func vaddrOf(f *elfsym.File, off uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}
