// Package elfsym reads the symbol tables of ELF files that a hostile user
// may have written. An ELF header's sizes and offsets are its author's
// claims: a 48 KB sparse file can claim a 6 GiB .symtab, and debug/elf
// reads a section whole, by its claimed size. Here every section is checked
// against the real file size, against a cap, and against its neighbours
// before debug/elf sees the file; symbol tables are then streamed in small
// chunks, and every file's reads together are held to a byte budget.
package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// Caps on what a real file needs, far above it. libtorch_cpu.so, among the
// largest shared objects an inference server maps, has a .dynsym of a few
// MiB; a section header table has tens of entries.
const (
	MaxSymtab   = 256 << 20 // a symbol table (24 bytes a symbol)
	MaxStrtab   = 256 << 20 // its names
	MaxShstrtab = 1 << 20   // section names (debug/elf reads them whole)
	MaxSections = 1 << 16
	MaxRead     = 256 << 20 // all reads of one file together
)

// ErrBudget is returned once a file's reads pass MaxRead.
var ErrBudget = errors.New("read budget exceeded")

// ErrInvalid marks a file the checks refused: not ELF, truncated, or with a
// layout no linker writes. Trying again cannot help.
var ErrInvalid = errors.New("invalid ELF file")

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &invalidError{fmt.Sprintf(format, args...)}
}

// File is an ELF file whose layout has been checked.
type File struct {
	*elf.File
	Name   string // the file, for messages
	r      io.ReaderAt
	closer io.Closer
}

// Open checks and opens f, which the File then owns. name is how messages
// name it (the path the target maps, and the path it was opened by).
func Open(f *os.File, name string) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, invalid("%s: not a regular file", name)
	}
	ef, err := NewFile(f, st.Size(), name)
	if err != nil {
		f.Close()
		return nil, err
	}
	ef.closer = f
	return ef, nil
}

// OpenPath opens a file by path (one the user named).
func OpenPath(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return Open(f, path)
}

// NewFile checks the layout of the size bytes r holds, then decodes the
// headers with debug/elf.
func NewFile(r io.ReaderAt, size int64, name string) (*File, error) {
	b := &budget{r: r, left: MaxRead}
	if err := check(b, uint64(size), name); err != nil {
		return nil, err
	}
	ef, err := elf.NewFile(io.NewSectionReader(b, 0, size))
	if err != nil {
		return nil, invalid("%s: %v", name, err)
	}
	return &File{File: ef, Name: name, r: b}, nil
}

// Close closes the file.
func (f *File) Close() error {
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}

// ReadAt reads file bytes (a function's first instructions), within the
// file's read budget.
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.r.ReadAt(p, off) }

type budget struct {
	r    io.ReaderAt
	left int64
}

func (b *budget) ReadAt(p []byte, off int64) (int, error) {
	if int64(len(p)) > b.left {
		return 0, fmt.Errorf("%w: more than %d bytes read", ErrBudget, MaxRead)
	}
	n, err := b.r.ReadAt(p, off)
	b.left -= int64(n)
	return n, err
}

// check validates the ELF header, the section headers and the sections'
// places in the file, reading only headers.
func check(r io.ReaderAt, size uint64, name string) error {
	hd, err := checkHeader(r, size, name)
	if err != nil || hd.shoff == 0 {
		return err // no section headers: no symbols, nothing more to check
	}
	secs, err := readSections(r, size, name, hd)
	if err != nil {
		return err
	}
	names, err := readSectionNames(r, size, name, secs, hd.shstrndx)
	if err != nil {
		return err
	}
	return checkSections(secs, names, size, name)
}

// header is what check needs of the ELF header, extended numbering applied.
type header struct {
	shoff, shnum, shstrndx uint64
}

// checkHeader validates the identification, the ELF header and where the
// program and section headers lie.
func checkHeader(r io.ReaderAt, size uint64, name string) (header, error) {
	var ident [elf.EI_NIDENT]byte
	if n, _ := r.ReadAt(ident[:], 0); n < 4 || !bytes.Equal(ident[:4], []byte(elf.ELFMAG)) {
		return header{}, invalid("%s: not an ELF file (it starts with %q)", name, ident[:min(n, 4)])
	}
	if elf.Class(ident[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(ident[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return header{}, invalid("%s: a %s %s ELF file; specprobe reads 64-bit little-endian ones", name,
			elf.Class(ident[elf.EI_CLASS]), elf.Data(ident[elf.EI_DATA]))
	}
	var h elf.Header64
	if err := readStruct(r, 0, &h); err != nil {
		return header{}, invalid("%s: truncated ELF header: %v", name, err)
	}
	hd := header{shoff: h.Shoff, shnum: uint64(h.Shnum), shstrndx: uint64(h.Shstrndx)}
	phnum := uint64(h.Phnum)
	if hd.shoff != 0 {
		if h.Shentsize != 64 {
			return hd, invalid("%s: section header size %d, want 64", name, h.Shentsize)
		}
		if hd.shoff > size || size-hd.shoff < 64 {
			return hd, invalid("%s: section headers at %#x, past the end of the file (%d bytes): truncated or forged", name, hd.shoff, size)
		}
		var s0 elf.Section64
		if err := readStruct(r, int64(hd.shoff), &s0); err != nil {
			return hd, invalid("%s: %v", name, err)
		}
		// Extended numbering: counts that do not fit in 16 bits live in
		// section 0.
		if hd.shnum == 0 {
			hd.shnum = s0.Size
		}
		if hd.shstrndx == uint64(elf.SHN_XINDEX) {
			hd.shstrndx = uint64(s0.Link)
		}
		if phnum == 0xffff {
			phnum = uint64(s0.Info)
		}
	}
	if h.Phoff != 0 && phnum > 0 {
		if h.Phentsize != 56 {
			return hd, invalid("%s: program header size %d, want 56", name, h.Phentsize)
		}
		if h.Phoff > size || phnum > (size-h.Phoff)/56 {
			return hd, invalid("%s: %d program headers at %#x do not fit in the file (%d bytes): truncated or forged", name, phnum, h.Phoff, size)
		}
	}
	return hd, nil
}

// readSections reads the section headers, bounded by the file and MaxSections.
func readSections(r io.ReaderAt, size uint64, name string, hd header) ([]elf.Section64, error) {
	if hd.shnum > MaxSections || hd.shnum > (size-hd.shoff)/64 {
		return nil, invalid("%s: %d section headers at %#x do not fit in the file (%d bytes), or are more than %d: truncated or forged", name, hd.shnum, hd.shoff, size, MaxSections)
	}
	secs := make([]elf.Section64, hd.shnum)
	raw := make([]byte, hd.shnum*64)
	if _, err := r.ReadAt(raw, int64(hd.shoff)); err != nil {
		return nil, invalid("%s: reading section headers: %v", name, err)
	}
	if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, secs); err != nil {
		return nil, invalid("%s: %v", name, err)
	}
	if hd.shstrndx >= hd.shnum && hd.shstrndx != 0 {
		return nil, invalid("%s: section name table index %d of %d sections", name, hd.shstrndx, hd.shnum)
	}
	return secs, nil
}

// readSectionNames reads the section name table, bounded by MaxShstrtab;
// none where shstrndx is 0.
func readSectionNames(r io.ReaderAt, size uint64, name string, secs []elf.Section64, shstrndx uint64) (sectionNames, error) {
	names := sectionNames{}
	if shstrndx == 0 {
		return names, nil
	}
	st := secs[shstrndx]
	if err := fits(st, size); err != nil {
		return names, invalid("%s: section name table: %v", name, err)
	}
	if st.Size > MaxShstrtab {
		return names, invalid("%s: section name table of %d bytes, more than the %d specprobe reads", name, st.Size, MaxShstrtab)
	}
	names.b = make([]byte, st.Size)
	if _, err := r.ReadAt(names.b, int64(st.Off)); err != nil {
		return names, invalid("%s: reading section names: %v", name, err)
	}
	return names, nil
}

// checkSections checks each section's bytes lie in the file, the symbol
// and string tables' sizes, and that no two sections share bytes.
func checkSections(secs []elf.Section64, names sectionNames, size uint64, name string) error {
	type span struct {
		off, end uint64
		i        int
	}
	var spans []span
	for i, s := range secs {
		if elf.SectionType(s.Type) == elf.SHT_NOBITS || s.Size == 0 || i == 0 {
			continue
		}
		what := fmt.Sprintf("section %d (%s)", i, names.get(s.Name))
		if err := fits(s, size); err != nil {
			return invalid("%s: %s %v", name, what, err)
		}
		if err := checkTable(secs, s, what); err != nil {
			return invalid("%s: %s", name, err)
		}
		spans = append(spans, span{s.Off, s.Off + s.Size, i})
	}
	// Sections never share bytes in a file a linker wrote; sections that do
	// are a table pointed at another's bytes to make a reader loop over them.
	sort.Slice(spans, func(a, b int) bool { return spans[a].off < spans[b].off })
	for k := 1; k < len(spans); k++ {
		if a, b := spans[k-1], spans[k]; b.off < a.end {
			return invalid("%s: sections %d (%s) and %d (%s) overlap (bytes %#x-%#x and %#x-%#x): forged", name,
				a.i, names.get(secs[a.i].Name), b.i, names.get(secs[b.i].Name), a.off, a.end, b.off, b.end)
		}
	}
	return nil
}

// checkTable bounds a symbol or string table section.
func checkTable(secs []elf.Section64, s elf.Section64, what string) error {
	switch elf.SectionType(s.Type) {
	case elf.SHT_SYMTAB, elf.SHT_DYNSYM:
		if s.Size > MaxSymtab {
			return fmt.Errorf("%s claims a %d-byte symbol table, more than the %d specprobe reads", what, s.Size, MaxSymtab)
		}
		if s.Entsize != symSize || s.Flags&uint64(elf.SHF_COMPRESSED) != 0 {
			return fmt.Errorf("%s: entry size %d, want %d uncompressed", what, s.Entsize, symSize)
		}
		if uint64(s.Link) >= uint64(len(secs)) || elf.SectionType(secs[s.Link].Type) != elf.SHT_STRTAB {
			return fmt.Errorf("%s: its string table (section %d) is not one", what, s.Link)
		}
	case elf.SHT_STRTAB:
		if s.Size > MaxStrtab {
			return fmt.Errorf("%s claims a %d-byte string table, more than the %d specprobe reads", what, s.Size, MaxStrtab)
		}
	}
	return nil
}

// fits checks that a section's bytes lie inside the file.
func fits(s elf.Section64, size uint64) error {
	if s.Off > size || s.Size > size-s.Off {
		return invalid("claims bytes %#x-%#x, past the end of the file (%d bytes): truncated or forged", s.Off, s.Off+s.Size, size)
	}
	return nil
}

func readStruct(r io.ReaderAt, off int64, v any) error {
	b := make([]byte, binary.Size(v))
	if _, err := r.ReadAt(b, off); err != nil {
		return err
	}
	return binary.Read(bytes.NewReader(b), binary.LittleEndian, v)
}

type sectionNames struct{ b []byte }

func (n sectionNames) get(off uint32) string {
	if int(off) >= len(n.b) {
		return "?"
	}
	s := n.b[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return string(s[:min(len(s), 64)])
}
