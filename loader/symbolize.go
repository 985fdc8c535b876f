package loader

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
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
	syms  []elf.Symbol // functions, by address
	progs []elf.Prog
}

// NewSymbolizer reads pid's executable mappings and their symbols once.
func NewSymbolizer(pid int) (*Symbolizer, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string]*fileSyms{}
	s := &Symbolizer{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.Contains(fields[1], "x") || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		off, _ := strconv.ParseUint(fields[2], 16, 64)
		path := fields[5]
		fs := files[path]
		if fs == nil {
			fs = loadSyms(fmt.Sprintf("/proc/%d/root%s", pid, path), path)
			files[path] = fs
		}
		s.ranges = append(s.ranges, execRange{start, end, off, fs})
	}
	return s, sc.Err()
}

func loadSyms(open, path string) *fileSyms {
	fs := &fileSyms{path: path}
	f, err := elf.Open(open)
	if err != nil {
		return fs
	}
	defer f.Close()
	fs.syms = funcs(f)
	fs.progs = make([]elf.Prog, len(f.Progs))
	for i, p := range f.Progs {
		fs.progs[i] = *p
	}
	sort.Slice(fs.syms, func(i, j int) bool { return fs.syms[i].Value < fs.syms[j].Value })
	return fs
}

// Has tells whether a mapped file has a function named name.
func (s *Symbolizer) Has(name string) bool {
	for _, r := range s.ranges {
		for _, sym := range r.file.syms {
			if sym.Name == name {
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
		i := sort.Search(len(r.file.syms), func(i int) bool { return r.file.syms[i].Value > vaddr }) - 1
		if i >= 0 {
			sym := r.file.syms[i]
			if vaddr < sym.Value+sym.Size {
				return fmt.Sprintf("%s+%#x", sym.Name, vaddr-sym.Value)
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
