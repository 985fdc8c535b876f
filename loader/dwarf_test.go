package loader

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/probes"
)

// The objects in testdata are built from testdata/structs.cpp (its header
// says how); its static_asserts hold the offsets expected here.

func fields(names ...string) []probes.Field {
	var out []probes.Field
	for _, n := range names {
		f, ok := probes.ParseField(n)
		if !ok {
			panic(n)
		}
		out = append(out, f)
	}
	return out
}

func openObject(t testing.TB, path string) *elfsym.File {
	t.Helper()
	f, err := elfsym.OpenPath(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestStructOffsets(t *testing.T) {
	want := map[string]int64{
		"server_slot.id": 0, "server_slot.spec_draft": 16, "server_slot.spec_i_batch": 40, "server_slot.task": 64,
		"server_task.index": 4, "ns::inner.v": 8, "ns::outer::nested.b": 4, "hidden.b": 4,
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for _, obj := range []string{"testdata/structs.o", "testdata/structs-dwarf2.o"} {
		t.Run(obj, func(t *testing.T) {
			d, err := dwarfData(openObject(t, obj))
			if err != nil || d == nil {
				t.Fatalf("dwarfData: %v, %v", d, err)
			}
			// Wanted one by one and all together: the walk skips what it
			// need not read, and must not skip a wanted struct's scope.
			for _, n := range names {
				got, err := StructOffsets(d, fields(n))
				if err != nil || len(got) != 1 || got[n].Offset != want[n] {
					t.Errorf("%s: %v, %v; want %d", n, got, err, want[n])
				}
			}
			got, err := StructOffsets(d, fields(names...))
			if err != nil || len(got) != len(want) {
				t.Fatalf("all: %v, %v", got, err)
			}
			for n, off := range want {
				if got[n].Offset != off || got[n].Units != 1 {
					t.Errorf("%s = %+v, want %d in 1 unit", n, got[n], off)
				}
			}
		})
	}
}

func TestStructOffsetsRefusals(t *testing.T) {
	d, err := dwarfData(openObject(t, "testdata/structs.o"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field, err string
	}{
		{"server_slot.tasks", "DWARF defines struct server_slot without a member tasks (its members: id, ctx_tgt, spec_draft, spec_i_batch, task)"},
		{"with_bits.b", "DWARF member with_bits.b: a bit field: no byte offset to read it at"},
		{"with_static.s", "DWARF member with_static.s is static: it is not in the struct"},
	}
	for _, tc := range tests {
		got, err := StructOffsets(d, fields(tc.field))
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: %v, %v; want error %q", tc.field, got, err, tc.err)
		}
	}
	// A struct the file does not define (or only elsewhere: inner is ns::inner)
	// is left to the spec's offsets, no error.
	got, err := StructOffsets(d, fields("absent.x", "inner.v", "outer::nested.b"))
	if err != nil || len(got) != 0 {
		t.Errorf("undefined structs: %v, %v", got, err)
	}

	// Two objects linked together, server_slot in one with a bool more.
	d, err = dwarfData(openObject(t, "testdata/conflict.o"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StructOffsets(d, fields("server_slot.task")); err == nil || err.Error() != "DWARF describes struct server_slot twice, with member task at offset 64 and at 72: refusing both" {
		t.Errorf("conflict: %v", err)
	}
	got, err = StructOffsets(d, fields("server_slot.id", "server_task.index"))
	if err != nil || got["server_slot.id"].Units != 2 || got["server_task.index"].Offset != 4 {
		t.Errorf("where both agree: %v, %v", got, err)
	}
}

// readObject is a test object's bytes, and debug/elf's view of them (to
// find what to forge).
func readObject(t *testing.T, path string) ([]byte, *elf.File) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return data, ef
}

// A forged file cannot make dwarfData allocate what its headers claim.
func TestDWARFForgedSizes(t *testing.T) {
	data, ef := readObject(t, "testdata/structs.o")
	var h elf.Header64
	binary.Read(bytes.NewReader(data), binary.LittleEndian, &h)
	shdr := func(name string) int {
		for i, s := range ef.Sections {
			if s.Name == name {
				return int(h.Shoff) + i*64
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	open := func(t *testing.T, b []byte) (*elfsym.File, error) {
		return elfsym.NewFile(bytes.NewReader(b), int64(len(b)), "forged.o")
	}

	t.Run("compressed section claiming 4 GiB", func(t *testing.T) {
		b := bytes.Clone(data)
		off := shdr(".debug_info")
		flags := binary.LittleEndian.Uint64(b[off+8:])
		binary.LittleEndian.PutUint64(b[off+8:], flags|uint64(elf.SHF_COMPRESSED))
		sec := ef.Section(".debug_info")
		// An Elf64_Chdr in place of the section's first bytes: zlib, 4 GiB.
		binary.LittleEndian.PutUint32(b[sec.Offset:], uint32(elf.COMPRESS_ZLIB))
		binary.LittleEndian.PutUint64(b[sec.Offset+8:], 4<<30)
		binary.LittleEndian.PutUint64(b[sec.Offset+16:], 1)
		f, err := open(t, b)
		if err != nil {
			t.Skipf("refused before DWARF: %v", err)
		}
		if _, err := dwarfData(f); !errors.Is(err, ErrDWARFTooLarge) || !strings.Contains(err.Error(), "its DWARF sections hold more than 512 MiB (.debug_info claims 4294967296 bytes): not read") {
			t.Errorf("dwarfData: %v", err)
		}
	})
	t.Run(".zdebug header claiming 1 TiB", func(t *testing.T) {
		b := bytes.Clone(data)
		sec := ef.Section(".debug_abbrev")
		// Rename .debug_abbrev to .zdebug_abbre (same length) and give it a ZLIB header.
		nameOff := int(ef.Sections[h.Shstrndx].Offset) + int(binary.LittleEndian.Uint32(b[shdr(".debug_abbrev"):]))
		copy(b[nameOff:], ".zdebug_abbre")
		copy(b[sec.Offset:], "ZLIB")
		binary.BigEndian.PutUint64(b[sec.Offset+4:], 1<<40)
		f, err := open(t, b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dwarfData(f); err == nil || !strings.Contains(err.Error(), "more than 512 MiB (.zdebug_abbre claims 1099511627776 bytes)") {
			t.Errorf("dwarfData: %v", err)
		}
	})
	t.Run("no DWARF", func(t *testing.T) {
		b := bytes.Clone(data)
		nameOff := int(ef.Sections[h.Shstrndx].Offset) + int(binary.LittleEndian.Uint32(b[shdr(".debug_info"):]))
		copy(b[nameOff:], ".notdeb_info")
		f, err := open(t, b)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := dwarfData(f); d != nil || err != nil {
			t.Errorf("dwarfData of a file without .debug_info: %v, %v", d, err)
		}
	})
	t.Run("garbage DWARF", func(t *testing.T) {
		b := bytes.Clone(data)
		sec := ef.Section(".debug_info")
		for i := uint64(4); i < sec.Size; i++ {
			b[sec.Offset+i] = byte(i * 7)
		}
		f, err := open(t, b)
		if err != nil {
			t.Fatal(err)
		}
		d, err := dwarfData(f)
		if err == nil {
			_, err = StructOffsets(d, fields("server_slot.task"))
		}
		if err == nil {
			t.Errorf("garbage .debug_info read without an error")
		}
	})
}

// FuzzStructOffsets: any file, as the DWARF reader meets it, makes offsets
// or an error; never a panic, an allocation its headers ask for, or a hang.
func FuzzStructOffsets(f *testing.F) {
	for _, obj := range []string{"testdata/structs.o", "testdata/structs-dwarf2.o", "testdata/conflict.o"} {
		data, err := os.ReadFile(obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	want := fields("server_slot.task", "server_slot.id", "ns::outer::nested.b", "with_bits.b")
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := elfsym.NewFile(bytes.NewReader(data), int64(len(data)), "fuzz.o")
		if err != nil {
			return
		}
		d, err := dwarfData(ef)
		if err != nil || d == nil {
			return
		}
		got, err := StructOffsets(d, want)
		if err != nil {
			return
		}
		for k, v := range got {
			if v.Offset < 0 || v.Offset > probes.MaxFieldOffset || v.Units < 1 {
				t.Fatalf("%s = %+v", k, v)
			}
		}
	})
}
