package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// sample builds a small unstripped ELF (with .symtab and .dynsym).
func sample(t testing.TB) []byte {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "s.c")
	out := filepath.Join(dir, "s")
	if err := os.WriteFile(src, []byte("int draft(int x){return x+1;}\nint main(){return draft(0);}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-O1", "-rdynamic", "-o", out, src).CombinedOutput(); err != nil {
		t.Skipf("gcc could not build the sample ELF: %v %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shdr returns the offset in data of the header of the section named name.
func shdr(t testing.TB, data []byte, name string) int {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	shoff := binary.LittleEndian.Uint64(data[0x28:])
	for i, s := range f.Sections {
		if s.Name == name {
			return int(shoff) + 64*i
		}
	}
	t.Fatalf("no section %s", name)
	return 0
}

func put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }

// Section64 fields: Off at +0x18, Size at +0x20.
const (
	shOff  = 0x18
	shSize = 0x20
)

func TestSymbolsMatchDebugELF(t *testing.T) {
	data := sample(t)
	f, err := NewFile(bytes.NewReader(data), int64(len(data)), "sample")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := f.Symbols(func(s elf.Symbol, dyn bool) bool {
		got = append(got, s.Name)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	ref, _ := elf.NewFile(bytes.NewReader(data))
	var want []string
	st, _ := ref.Symbols()
	ds, _ := ref.DynamicSymbols()
	for _, s := range append(st, ds...) {
		want = append(want, s.Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("symbols differ from debug/elf's:\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(strings.Join(got, ","), "draft") {
		t.Errorf("no symbol draft in %v", got)
	}
}

// TestSystemFiles: every real ELF file of this machine's libraries opens and
// yields the symbols debug/elf sees, so the checks refuse no real file.
func TestSystemFiles(t *testing.T) {
	var paths []string
	for _, glob := range []string{"/usr/lib/x86_64-linux-gnu/*.so*", "/usr/bin/*", "/root/.pyenv/versions/*/lib/libpython3*.so*", "/root/.pyenv/versions/*/bin/python3.*"} {
		m, _ := filepath.Glob(glob)
		paths = append(paths, m...)
	}
	if self, err := os.Executable(); err == nil {
		paths = append(paths, self)
	}
	checked := 0
	for _, p := range paths {
		ref, err := elf.Open(p)
		if err != nil || ref.Class != elf.ELFCLASS64 {
			continue // not an ELF file (scripts), or not one we read
		}
		st, _ := ref.Symbols()
		ds, _ := ref.DynamicSymbols()
		ref.Close()
		f, err := OpenPath(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		n := 0
		err = f.Symbols(func(elf.Symbol, bool) bool { n++; return true })
		f.Close()
		if err != nil || n != len(st)+len(ds) {
			t.Errorf("%s: %d symbols (%v), debug/elf reads %d", p, n, err, len(st)+len(ds))
		}
		checked++
	}
	if checked < 20 {
		t.Skipf("only %d ELF files found to check", checked)
	}
	t.Logf("%d files checked", checked)
}

func TestForgedFiles(t *testing.T) {
	base := sample(t)
	for _, tc := range []struct {
		name  string
		forge func(b []byte) []byte
		want  string
	}{
		{"not ELF", func([]byte) []byte { return []byte("#!/bin/sh\necho hi\n") }, "not an ELF file"},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, "past the end of the file"},
		{"symtab past the end", func(b []byte) []byte { put64(b, shdr(t, b, ".symtab")+shSize, 6<<30); return b }, "past the end of the file"},
		{"overlapping", func(b []byte) []byte {
			sym := shdr(t, b, ".symtab")
			put64(b, shdr(t, b, ".strtab")+shOff, binary.LittleEndian.Uint64(b[sym+shOff:]))
			return b
		}, "overlap"},
		{"huge section names", func(b []byte) []byte {
			put64(b, shdr(t, b, ".shstrtab")+shSize, 1<<40)
			return b
		}, "section name table"},
		{"32-bit", func(b []byte) []byte { b[elf.EI_CLASS] = byte(elf.ELFCLASS32); return b }, "64-bit little-endian"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.forge(bytes.Clone(base))
			_, err := NewFile(bytes.NewReader(b), int64(len(b)), "/forged/"+tc.name)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "/forged/"+tc.name+": ") {
				t.Errorf("err = %v, want one naming the file and saying %q", err, tc.want)
			}
		})
	}
}

// TestSparseHugeSymtab is the attack: a file of 6 GiB that holds 48 KB,
// whose .symtab claims nearly all of it. It is refused by its size before
// anything is read, and costs no memory.
func TestSparseHugeSymtab(t *testing.T) {
	b := bytes.Clone(sample(t))
	const claimed = 6 << 30
	sym := shdr(t, b, ".symtab")
	put64(b, sym+shSize, claimed-uint64(len(b)))
	// Move .symtab's bytes to the end so it overlaps nothing: only its size is wrong.
	put64(b, sym+shOff, uint64(len(b)))
	path := filepath.Join(t.TempDir(), "python3-forged")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 2*claimed); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := OpenPath(path)
	if err == nil {
		err = f.Symbols(func(elf.Symbol, bool) bool { return true })
		f.Close()
	}
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "more than the") || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want the symbol table refused by its size, naming the file", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("allocated %d bytes to refuse it", grew)
	}
}

func TestReadBudget(t *testing.T) {
	b := &budget{r: bytes.NewReader(make([]byte, 100)), left: 60}
	p := make([]byte, 50)
	if _, err := b.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadAt(p, 50); err == nil {
		t.Error("a read past the budget succeeded")
	}
}

// TestStrReaderWindow reads names through a window smaller than the table,
// in and out of order, across window edges.
func TestStrReaderWindow(t *testing.T) {
	table := []byte("\x00alpha\x00beta\x00a-name-longer-than-the-window\x00z")
	for _, window := range []uint64{4, 8, 16, uint64(len(table))} {
		s := &strReader{r: bytes.NewReader(table), size: uint64(len(table)), window: window}
		for _, tc := range []struct {
			off  uint64
			want string
		}{{1, "alpha"}, {7, "beta"}, {3, "pha"}, {0, ""}, {12, "a-name-longer-than-the-window"}, {42, ""}, {1000, ""}} {
			got, err := s.get(tc.off)
			want := tc.want
			if uint64(len(want)) >= window && window < uint64(len(table)) {
				want = "" // longer than a window: dropped
			}
			if err != nil || got != want {
				t.Errorf("window %d: get(%d) = %q, %v; want %q", window, tc.off, got, err, want)
			}
		}
	}
}
