package loader

import (
	"debug/elf"
	"fmt"
	"strings"

	"github.com/ianlancetaylor/demangle"

	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/internal/near"
)

// Symbol is a function found in a file, with where to put a uprobe on it.
type Symbol struct {
	Name      string // as in the symbol table
	Demangled string
	Offset    uint64 // file offset of the first instruction
	Size      uint64
}

// eachFunc calls fn for each defined function of .symtab, then .dynsym; a
// stripped table is no error: the other may have the function.
func eachFunc(f *elfsym.File, fn func(elf.Symbol)) error {
	return f.Symbols(func(s elf.Symbol, _ bool) bool {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && s.Value != 0 {
			fn(s)
		}
		return true
	})
}

// fileOffset converts a symbol's virtual address to an offset in the file,
// which is what the kernel's uprobe API takes.
func fileOffset(f *elfsym.File, vaddr uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// matches tells whether a symbol is the one a spec names: exactly, by its full
// demangled signature, or by its demangled name without parameters.
func matches(want string, s elf.Symbol) (demangled string, ok bool) {
	if s.Name == want {
		return demangle.Filter(s.Name), true
	}
	// Compiler clones (.cold, .isra.0, .constprop.0, .part.0) are not the
	// function's entry, or take a changed ABI: only an exact name selects one.
	if !strings.HasPrefix(s.Name, "_Z") || strings.Contains(s.Name, ".") {
		return "", false
	}
	full := demangle.Filter(s.Name)
	if strings.Contains(want, "(") {
		return full, normalize(full) == normalize(want)
	}
	short, err := demangle.ToString(s.Name, demangle.NoParams)
	return full, err == nil && short == want
}

func normalize(sig string) string {
	return strings.ReplaceAll(sig, " ", "")
}

// FindSymbol looks a function up in one ELF file. Several different functions
// matching (overloads) is an error that lists them.
func FindSymbol(path, want string) (*Symbol, error) {
	f, err := elfsym.OpenPath(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return findSymbol(f, want)
}

func findSymbol(f *elfsym.File, want string) (*Symbol, error) {
	var found []*Symbol
	err := eachFunc(f, func(s elf.Symbol) {
		dem, ok := matches(want, s)
		if !ok {
			return
		}
		off, ok := fileOffset(f, s.Value)
		if ok && !containsOffset(found, off) {
			found = append(found, &Symbol{Name: s.Name, Demangled: dem, Offset: off, Size: s.Size})
		}
	})
	if err != nil {
		return nil, err
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	var names []string
	for _, s := range found {
		names = append(names, fmt.Sprintf("%s (%s)", s.Demangled, s.Name))
	}
	return nil, fmt.Errorf("symbol %q matches %d functions in %s; give the full signature or the mangled name:\n  %s",
		want, len(found), f.Name, strings.Join(names, "\n  "))
}

func containsOffset(list []*Symbol, off uint64) bool {
	for _, s := range list {
		if s.Offset == off {
			return true
		}
	}
	return false
}

// NearNames suggests functions of a file whose names resemble want, for a
// "symbol not found" message.
func NearNames(path, want string, limit int) []string {
	f, err := elfsym.OpenPath(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return nearNames(f, want, limit)
}

func nearNames(f *elfsym.File, want string, limit int) []string {
	key := strings.ToLower(lastComponent(want))
	seen := map[string]bool{}
	var cands near.List
	_ = eachFunc(f, func(s elf.Symbol) { // a read error leaves fewer suggestions
		name := demangle.Filter(s.Name)
		short := name
		if n, err := demangle.ToString(s.Name, demangle.NoParams); err == nil {
			short = n
		}
		if seen[short] {
			return
		}
		seen[short] = true
		last := strings.ToLower(lastComponent(short))
		d := near.Distance(key, last)
		if strings.Contains(last, key) || strings.Contains(key, last) && len(last) > 3 {
			d = min(d, 1+abs(len(last)-len(key))/4)
		}
		if d <= max(len(key)/3, 2) {
			cands.Add(short, d)
		}
	})
	return cands.Best(limit)
}

func lastComponent(name string) string {
	if i := strings.Index(name, "("); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, "::"); i >= 0 {
		name = name[i+2:]
	}
	return name
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
