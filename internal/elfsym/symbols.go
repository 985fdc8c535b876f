package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
)

const symSize = 24 // sizeof(Elf64_Sym)

// symChunk symbols are read at a time: 96 KiB.
const symChunk = 4096

// A string table up to strWhole bytes is read in one piece (.dynstr is in
// hash order, not symbol order: libLLVM's is a few MiB); a larger one
// (only a static .strtab gets so big, written in symbol order) through a
// window of strWindow bytes.
const (
	strWhole  = 16 << 20
	strWindow = 16 << 10
)

// Symbols calls each for every symbol of the static table (.symtab), then
// of the dynamic one (.dynsym), until each returns false. The symbol
// tables were checked by Open; they are read a chunk at a time.
func (f *File) Symbols(each func(s elf.Symbol, dynamic bool) bool) error {
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		for _, sec := range f.Sections {
			if sec.Type != typ {
				continue
			}
			more, err := f.table(sec, each, typ == elf.SHT_DYNSYM)
			if err != nil || !more {
				return err
			}
		}
	}
	return nil
}

func (f *File) table(sec *elf.Section, each func(elf.Symbol, bool) bool, dynamic bool) (bool, error) {
	strs := &strReader{r: f.r, off: f.Sections[sec.Link].Offset, size: f.Sections[sec.Link].Size, window: strWindow}
	if strs.size <= strWhole {
		strs.window = strs.size
	}
	n := sec.Size / symSize
	buf := make([]byte, symChunk*symSize)
	for i := uint64(1); i < n; { // symbol 0 is the null symbol
		k := min(symChunk, n-i)
		b := buf[:k*symSize]
		if _, err := f.r.ReadAt(b, int64(sec.Offset+i*symSize)); err != nil {
			return false, fmt.Errorf("%s: reading %s: %w", f.Name, sec.Name, err)
		}
		for j := range k {
			e := b[j*symSize : (j+1)*symSize]
			s := elf.Symbol{
				Info:    e[4],
				Other:   e[5],
				Section: elf.SectionIndex(binary.LittleEndian.Uint16(e[6:])),
				Value:   binary.LittleEndian.Uint64(e[8:]),
				Size:    binary.LittleEndian.Uint64(e[16:]),
			}
			name, err := strs.get(uint64(binary.LittleEndian.Uint32(e[0:])))
			if err != nil {
				return false, fmt.Errorf("%s: %s: %w", f.Name, sec.Name, err)
			}
			s.Name = name
			if !each(s, dynamic) {
				return false, nil
			}
		}
		i += k
	}
	return true, nil
}

// strReader reads NUL-terminated names out of a string table through a
// window: a table too big to read whole is never held whole.
type strReader struct {
	r         io.ReaderAt
	off, size uint64
	window    uint64
	win       []byte
	winOff    uint64
}

func (s *strReader) get(i uint64) (string, error) {
	if i >= s.size {
		return "", nil // out of the table: no name, as debug/elf gives
	}
	for try := 0; try < 2; try++ {
		if i < s.winOff || i >= s.winOff+uint64(len(s.win)) || try == 1 {
			if try == 1 && s.winOff == i || s.window >= s.size && len(s.win) > 0 {
				break // already read from i, or the whole table: no NUL to find
			}
			if err := s.load(i); err != nil {
				return "", err
			}
		}
		w := s.win[i-s.winOff:]
		if n := bytes.IndexByte(w, 0); n >= 0 {
			return string(w[:n]), nil
		}
	}
	return "", nil // unterminated, or longer than a window: not a name specprobe looks for
}

// load reads the window holding i: the whole table when it is small.
func (s *strReader) load(i uint64) error {
	start := i
	if s.window >= s.size {
		start = 0
	}
	n := min(s.window, s.size-start)
	if uint64(cap(s.win)) < n {
		s.win = make([]byte, n)
	}
	s.win, s.winOff = s.win[:n], start
	if _, err := s.r.ReadAt(s.win, int64(s.off+start)); err != nil {
		s.win = s.win[:0]
		return err
	}
	return nil
}
