package loader

import (
	"debug/elf"
	"fmt"
	"sort"

	"github.com/specprobe/specprobe/internal/procfs"
)

// Symbolizer names the function an instruction pointer of a process is in,
// from the symbol tables of the files it maps.
type Symbolizer struct {
	ranges []execRange
}

type execRange struct {
	start, end, off uint64 // mapping, and its file offset
	file            *fileSyms
}

type fileSyms struct {
	path  string
	syms  []funcSym // by address
	progs []elf.ProgHeader
}

type funcSym struct {
	value, size uint64
	name        string
}

// maxSymbolized bounds the functions a Symbolizer keeps over all files: a
// process mapping hundreds of large libraries keeps names for the first
// ones it maps (the executable and the interpreter come first).
const maxSymbolized = 1 << 20

// NewSymbolizer reads pid's executable mappings and their symbols once.
func NewSymbolizer(pid int) (*Symbolizer, error) {
	files := map[string]*fileSyms{}
	s := &Symbolizer{}
	kept := 0
	err := procfs.Maps(pid, func(m procfs.Map) bool {
		if !m.Exec() || !m.IsFile() {
			return true
		}
		fs := files[m.Path]
		if fs == nil {
			mp := Mapping{Path: m.Path, Inode: m.Inode, pid: pid, first: m}
			fs = loadSyms(mp, maxSymbolized-kept)
			kept += len(fs.syms)
			files[m.Path] = fs
		}
		s.ranges = append(s.ranges, execRange{m.Start, m.End, m.Offset, fs})
		return true
	})
	return s, err
}

// loadSyms reads up to limit functions of a mapped file; a file that cannot
// be read leaves only its name.
func loadSyms(m Mapping, limit int) *fileSyms {
	fs := &fileSyms{path: m.Path}
	f, err := m.openELF()
	if err != nil {
		return fs
	}
	defer f.Close()
	for _, p := range f.Progs {
		fs.progs = append(fs.progs, p.ProgHeader)
	}
	_ = eachFunc(f, func(s elf.Symbol) {
		if len(fs.syms) < limit {
			fs.syms = append(fs.syms, funcSym{s.Value, s.Size, s.Name})
		}
	})
	sort.Slice(fs.syms, func(i, j int) bool { return fs.syms[i].value < fs.syms[j].value })
	return fs
}

// Has tells whether a mapped file has a function named name.
func (s *Symbolizer) Has(name string) bool {
	for _, r := range s.ranges {
		for _, sym := range r.file.syms {
			if sym.name == name {
				return true
			}
		}
	}
	return false
}

// Name returns "function+0xoff" (or "file+0xoff" without a symbol) for ip.
func (s *Symbolizer) Name(ip uint64) string {
	for _, r := range s.ranges {
		if ip < r.start || ip >= r.end {
			continue
		}
		fileOff := ip - r.start + r.off
		vaddr, ok := r.file.vaddr(fileOff)
		if !ok {
			break
		}
		i := sort.Search(len(r.file.syms), func(i int) bool { return r.file.syms[i].value > vaddr }) - 1
		if i >= 0 {
			sym := r.file.syms[i]
			if vaddr < sym.value+sym.size {
				return fmt.Sprintf("%s+%#x", sym.name, vaddr-sym.value)
			}
		}
		return fmt.Sprintf("%s+%#x", r.file.path, fileOff)
	}
	return fmt.Sprintf("%#x", ip)
}

func (fs *fileSyms) vaddr(fileOff uint64) (uint64, bool) {
	for _, p := range fs.progs {
		if p.Type == elf.PT_LOAD && fileOff >= p.Off && fileOff < p.Off+p.Filesz {
			return fileOff - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}
