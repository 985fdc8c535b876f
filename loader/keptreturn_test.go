package loader

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/internal/testinterp"
)

// Code assembled with GNU as from the shapes the test names (at address 0
// for each function; the comments give the source).
var (
	// call *0x558(%rax); mov %rax,%r12; mov (%rbx),%rax; cmp $1,%rax; jg K;
	// sub $1,%rax; mov %rax,(%rbx); pop %rbx; ret; nopl (%rax);
	// K: sub $1,%rax; mov %rax,(%rbx); ret  (pyenv 3.10's _PyEval_Vector)
	keptGCC = []byte{0xff, 0x90, 0x58, 0x05, 0x00, 0x00, 0x49, 0x89, 0xc4, 0x48, 0x8b, 0x03, 0x48, 0x83, 0xf8, 0x01,
		0x7f, 0x0c, 0x48, 0x83, 0xe8, 0x01, 0x48, 0x89, 0x03, 0x5b, 0xc3, 0x0f, 0x1f, 0x00, 0x48, 0x83, 0xe8, 0x01,
		0x48, 0x89, 0x03, 0xc3}
	// call *0x10(%rdx); cmpq $1,(%r12); jle L; subq $1,(%r12); ret; L: ret
	keptJLE = []byte{0xff, 0x52, 0x10, 0x49, 0x83, 0x3c, 0x24, 0x01, 0x7e, 0x06, 0x49, 0x83, 0x2c, 0x24, 0x01, 0xc3, 0xc3}
	// call *0x10(%rdx); mov (%rax),%rdx; cmp $1,%rdx; jg K; ret; K: ret
	keptRAX = []byte{0xff, 0x52, 0x10, 0x48, 0x8b, 0x10, 0x48, 0x83, 0xfa, 0x01, 0x7f, 0x01, 0xc3, 0xc3}
	// call *0x10(%rdx); mov (%rbx),%rax; cmp $1,%rax; jg K; test %rax,%rax; je K; ret; K: ret
	keptTwice = []byte{0xff, 0x52, 0x10, 0x48, 0x8b, 0x03, 0x48, 0x83, 0xf8, 0x01, 0x7f, 0x06, 0x48, 0x85, 0xc0, 0x74, 0x01, 0xc3, 0xc3}
	// call K; mov (%rbx),%rax; cmp $1,%rax; jg K; ret; K: ret
	keptNoIndirect = []byte{0xe8, 0x0a, 0x00, 0x00, 0x00, 0x48, 0x8b, 0x03, 0x48, 0x83, 0xf8, 0x01, 0x7f, 0x01, 0xc3, 0xc3}
	// call *0x10(%rdx); mov (%rbx),%rax; cmp $1,%rax; jg K; mov %rax,%rcx; K: ret
	keptFallsIn = []byte{0xff, 0x52, 0x10, 0x48, 0x8b, 0x03, 0x48, 0x83, 0xf8, 0x01, 0x7f, 0x03, 0x48, 0x89, 0xc1, 0xc3}
)

func TestKeptBranch(t *testing.T) {
	for _, tc := range []struct {
		name string
		code []byte
		at   uint64
		reg  bpf.StageKeptReg
		err  string
	}{
		{"gcc: jg to the kept branch", keptGCC, 0x101e, bpf.StageKeptRegKEPT_BX, ""},
		{"jle over it: the fall-through, count compared in memory", keptJLE, 0x100a, bpf.StageKeptRegKEPT_R12, ""},
		{"the frame in a register the call clobbers", keptRAX, 0, 0, "does not preserve"},
		{"another jump to the branch", keptTwice, 0, 0, "also reached from 0x100f"},
		{"no indirect call", keptNoIndirect, 0, 0, "no indirect call"},
		{"code falling into the branch", keptFallsIn, 0, 0, "also reached from 0x100c"},
		{"not the count's test after the call", keptGCC[:9], 0, 0, "no test of the frame's count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			insns, err := decodeAll(tc.code, 0x1000)
			if err != nil {
				t.Fatal(err)
			}
			at, reg, err := keptBranch(insns)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || at != tc.at || reg != tc.reg {
				t.Errorf("%#x in %d (%v), want %#x in %d", at, reg, err, tc.at, tc.reg)
			}
		})
	}
}

func TestOnlyCallTo(t *testing.T) {
	// call rel32 to 0x2000 (a PLT entry); call *0x100(%rip) (a GOT slot at 0x1106)
	callPLT := []byte{0xe8, 0xfb, 0x0f, 0x00, 0x00}
	callGOT := []byte{0xff, 0x15, 0x00, 0x01, 0x00, 0x00}
	imports := map[uint64]string{0x2000: "memcpy", 0x1106: "memcpy"}
	named := func(target uint64) string { return imports[target] }
	for _, tc := range []struct {
		name string
		code []byte
		at   uint64
		n    int // calls found, when not one
	}{
		{"through the PLT", callPLT, 0x1000, 1},
		{"through the GOT (-fno-plt)", callGOT, 0x1000, 1},
		{"twice", append(append([]byte{}, callGOT...), 0xe8, 0xf5, 0x0f, 0x00, 0x00), 0, 2}, // then call rel32 to 0x2000
		{"never", []byte{0xc3}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			insns, err := decodeAll(tc.code, 0x1000)
			if err != nil {
				t.Fatal(err)
			}
			at, err := onlyCallTo(insns, "memcpy", named)
			if tc.n != 1 {
				if err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("%d calls", tc.n)) {
					t.Errorf("error %v, want %d calls found", err, tc.n)
				}
				return
			}
			if err != nil || at != tc.at {
				t.Errorf("%#x (%v), want %#x", at, err, tc.at)
			}
		})
	}
}

// ehFrameHdr is a .eh_frame_hdr listing functions at the given offsets
// from the section.
func ehFrameHdr(rel ...int32) []byte {
	b := []byte{1, 0x1b, 0x03, 0x3b, 0, 0, 0, 0}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rel)))
	for _, r := range rel {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
		b = binary.LittleEndian.AppendUint32(b, 0)
	}
	return b
}

func TestHdrAround(t *testing.T) {
	const sec = 0x10000
	hdr := ehFrameHdr(-0x8000, -0x7f00, -0x7000)
	for _, tc := range []struct {
		name       string
		data       []byte
		vaddr      uint64
		start, end uint64
		err        string
	}{
		{"first", hdr, 0x8000, 0x8000, 0x8100, ""},
		{"inside the second", hdr, 0x8123, 0x8100, 0x9000, ""},
		{"the last runs to the bound", hdr, 0x9010, 0x9000, 0x9000 + maxKeptFunc, ""},
		{"before every function", hdr, 0x7fff, 0, 0, "before every function"},
		{"a function larger than the bound", ehFrameHdr(-0x8000, 0x7000), 0x8000, 0, 0, "not one it bounds"},
		{"more functions claimed than held", append(hdr[:8:8], 9, 0, 0, 0), 0x8000, 0, 0, "claimed"},
		{"another encoding", append([]byte{1, 0x1b, 0x03, 0x1b}, hdr[4:]...), 0x8000, 0, 0, "form"},
		{"cut short", hdr[:10], 0x8000, 0, 0, "form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, end, err := hdrAround(tc.data, sec, tc.vaddr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || start != tc.start || end != tc.end {
				t.Errorf("[%#x, %#x) (%v), want [%#x, %#x)", start, end, err, tc.start, tc.end)
			}
		})
	}
}

// FuzzHdrAround: whatever a forged file holds, a function comes back
// inside the bound, or an error.
func FuzzHdrAround(f *testing.F) {
	f.Add(ehFrameHdr(-0x8000, -0x7f00), uint64(0x8123))
	f.Fuzz(func(t *testing.T, data []byte, vaddr uint64) {
		start, end, err := hdrAround(data, 0x10000, vaddr)
		if err == nil && (start > vaddr || end <= start || end-start > maxKeptFunc) {
			t.Errorf("[%#x, %#x) for %#x", start, end, vaddr)
		}
	})
}

// The interpreters here: where kept_return goes in each, found as attach
// finds it (by symbol, or from PyEval_EvalCode in Debian's stripped 3.11),
// is the instruction the shape says: a call to memcpy (3.11), or the
// kept-frame branch through a callee-saved register (3.10).
func TestKeptReturnInterpreters(t *testing.T) {
	for _, in := range testinterp.All {
		if in.Minor > 11 {
			continue
		}
		t.Run(in.Name, func(t *testing.T) {
			file := interpFile(t, in.Path, in.Minor)
			f, err := elfsym.OpenPath(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			k, err := findKeptReturn(f, in.Minor)
			if err != nil {
				t.Fatal(err)
			}
			code := make([]byte, 16)
			if _, err := f.ReadAt(code, int64(k.Offset)); err != nil {
				t.Fatal(err)
			}
			got := describe(code)
			switch {
			case in.Minor == 11 && (k.Reg != bpf.StageKeptRegKEPT_SI || !strings.HasPrefix(got, "call")):
				t.Errorf("%s at %#x: %s in %d, want the call to memcpy, its source in rsi", k.Func, k.Offset, got, k.Reg)
			case in.Minor == 10 && k.Reg == bpf.StageKeptRegKEPT_SI:
				t.Errorf("%s at %#x: %s in %d, want a callee-saved register", k.Func, k.Offset, got, k.Reg)
			}
			t.Logf("%s: %s at file offset %#x: %s", file, k.Func, k.Offset, got)
		})
	}
}

// interpFile is the file holding the interpreter: libpython beside a
// pyenv build, else the executable.
func interpFile(t *testing.T, exe string, minor int) string {
	if _, err := os.Stat(exe); err != nil {
		t.Skipf("interpreter %s not installed", exe)
	}
	lib := filepath.Join(filepath.Dir(filepath.Dir(exe)), "lib", fmt.Sprintf("libpython3.%d.so.1.0", minor))
	if _, err := os.Stat(lib); err == nil {
		return lib
	}
	return exe
}
