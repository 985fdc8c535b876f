package loader

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"

	"golang.org/x/arch/x86/x86asm"

	"github.com/specprobe/specprobe/bpf"
	"github.com/specprobe/specprobe/internal/elfsym"
)

// Python 3.10 and 3.11: where a call whose frame outlives it returns.
//
// A frame object still referenced when its call returns (a traceback kept,
// sys._getframe(), a thread holding sys._current_frames()) takes the
// frame's reference to its code object over without a write, so the
// watchpoint on the count sees that call end only when the frame object
// dies. (3.12 and later take a reference of their own there: a +1 the
// decoder ignores, then the usual -1.) kept_return, a uprobe, reports such
// a return where the interpreter hands the frame to its frame object, a
// place only frames that outlive their call reach:
//
//   - 3.11: _PyFrame_Clear copies a frame whose frame object is shared into
//     that object (take_ownership, inlined): its only call to memcpy, whose
//     source, in rsi at the call, is the returning frame.
//   - 3.10: _PyEval_Vector, once the eval loop returns, tests the frame
//     object's count (Py_REFCNT(f) > 1) and branches to hand it to the
//     collector; the probe goes at that branch, the frame in the
//     (callee-saved) register the test read it through.
//
// Both are found by decoding the function, found by its symbol. A stripped
// 3.11 (Debian's python3.11) has none: there it is found from an exported
// function that calls it (findKeptReturnStripped). A stripped 3.10 is told
// it has no probe.

// KeptReturn is where kept_return goes in the interpreter's file.
type KeptReturn struct {
	Func   string
	Offset uint64 // file offset of the probed instruction
	Reg    bpf.StageKeptReg
}

// maxKeptFunc bounds the bytes of the function decoded (both are a few
// hundred bytes; a forged symbol may claim any size).
const maxKeptFunc = 16 << 10

// keptFuncs names, per minor version, the function holding the place.
var keptFuncs = map[int]string{10: "_PyEval_Vector", 11: "_PyFrame_Clear"}

// findKeptReturn finds the place in f, the interpreter's file, by the
// function's symbol.
func findKeptReturn(f *elfsym.File, minor int) (KeptReturn, error) {
	name, ok := keptFuncs[minor]
	if !ok {
		return KeptReturn{}, fmt.Errorf("3.%d needs no probe for calls whose frame outlives them", minor)
	}
	var sym *elf.Symbol
	err := eachFunc(f, func(s elf.Symbol) {
		if s.Name == name && sym == nil {
			sym = &s
		}
	})
	if err != nil {
		return KeptReturn{}, err
	}
	if sym == nil && minor == 11 {
		return findKeptReturnStripped(f)
	}
	if sym == nil {
		return KeptReturn{}, fmt.Errorf("%s has no symbol %s (a stripped interpreter)", f.Name, name)
	}
	return keptIn(f, minor, name, sym.Value, sym.Size)
}

// findKeptReturnStripped finds the place in a 3.11 interpreter without
// _PyFrame_Clear's symbol (Debian's python3.11): it is the one function
// that PyEval_EvalCode (public API, exported by every build) reaches
// through functions without a name, at most two calls deep, and that calls
// memcpy once. PyEval_EvalCode runs code in a frame and clears it
// (_PyEval_Vector, inlined into it where the build links with LTO); the
// named functions it calls (the eval loop) are not followed, where other
// functions copying a frame live. .eh_frame_hdr bounds the functions.
func findKeptReturnStripped(f *elfsym.File) (KeptReturn, error) {
	entry, err := findSymbol(f, "PyEval_EvalCode")
	if err != nil || entry == nil {
		return KeptReturn{}, fmt.Errorf("%s has no symbol _PyFrame_Clear, nor PyEval_EvalCode to find it from", f.Name)
	}
	named := map[uint64]bool{}
	_ = eachFunc(f, func(s elf.Symbol) { named[s.Value] = true })
	start, ok := vaddrOf(f, entry.Offset)
	if !ok {
		return KeptReturn{}, fmt.Errorf("%s: PyEval_EvalCode is in no loaded segment", f.Name)
	}
	seen := map[uint64]bool{start: true}
	level := []uint64{start}
	var found []KeptReturn
	for depth := 0; depth < 2; depth++ {
		var next []uint64
		for _, fn := range level {
			insns, err := funcInsns(f, fn)
			if err != nil {
				continue
			}
			for _, in := range insns {
				to, ok := branchTarget(in)
				if in.Op != x86asm.CALL || !ok || seen[to] || named[to] {
					continue
				}
				seen[to] = true
				if k, err := findKeptReturnAt(f, to); err == nil {
					found = append(found, k)
				}
				next = append(next, to)
			}
		}
		level = next
	}
	if len(found) != 1 {
		return KeptReturn{}, fmt.Errorf("%s has no symbol _PyFrame_Clear, and %d functions PyEval_EvalCode reaches copy a frame", f.Name, len(found))
	}
	return found[0], nil
}

// funcInsns decodes the function at vaddr start, bounded by .eh_frame_hdr.
func funcInsns(f *elfsym.File, start uint64) ([]insn, error) {
	s, end, err := funcAround(f, start)
	if err != nil || s != start {
		return nil, fmt.Errorf("%s: no function begins at %#x", f.Name, start)
	}
	code, err := funcCode(f, "", start, end-start)
	if err != nil {
		return nil, err
	}
	return decodeAll(code, start)
}

// findKeptReturnAt finds the place in the function of a stripped 3.11
// that begins at vaddr.
func findKeptReturnAt(f *elfsym.File, vaddr uint64) (KeptReturn, error) {
	start, end, err := funcAround(f, vaddr)
	if err != nil {
		return KeptReturn{}, err
	}
	if start != vaddr {
		return KeptReturn{}, fmt.Errorf("%s: no function begins at %#x", f.Name, vaddr)
	}
	return keptIn(f, 11, fmt.Sprintf("_PyFrame_Clear (unnamed, at %#x)", start), start, end-start)
}

// funcCode reads size bytes of code at vaddr start.
func funcCode(f *elfsym.File, name string, start, size uint64) ([]byte, error) {
	off, ok := fileOffset(f, start)
	if !ok || size == 0 || size > maxKeptFunc {
		return nil, fmt.Errorf("%s: %s (%d bytes at %#x) is not a function this file holds", f.Name, name, size, start)
	}
	code := make([]byte, size)
	if _, err := f.ReadAt(code, int64(off)); err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", f.Name, name, err)
	}
	return code, nil
}

// keptIn decodes the function at vaddr start and finds the place there.
func keptIn(f *elfsym.File, minor int, name string, start, size uint64) (KeptReturn, error) {
	code, err := funcCode(f, name, start, size)
	if err != nil {
		return KeptReturn{}, err
	}
	insns, err := decodeAll(code, start)
	if err != nil {
		return KeptReturn{}, fmt.Errorf("%s: %s: %w", f.Name, name, err)
	}
	var at uint64
	var reg bpf.StageKeptReg
	if minor == 10 {
		at, reg, err = keptBranch(insns)
	} else {
		at, err = onlyCallTo(insns, "memcpy", func(target uint64) string { return importAt(f, target) })
		reg = bpf.StageKeptRegKEPT_SI
	}
	if err != nil {
		return KeptReturn{}, fmt.Errorf("%s: %s: %w", f.Name, name, err)
	}
	off, _ := fileOffset(f, at)
	return KeptReturn{Func: name, Offset: off, Reg: reg}, nil
}

// funcAround bounds the function holding vaddr by .eh_frame_hdr's sorted
// table of the functions' first addresses: from the last at or below
// vaddr to the next. Only the table's usual encoding (4-byte entries
// relative to the section) is read.
func funcAround(f *elfsym.File, vaddr uint64) (start, end uint64, err error) {
	sec := f.Section(".eh_frame_hdr")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return 0, 0, fmt.Errorf("%s has neither the symbol nor .eh_frame_hdr", f.Name)
	}
	data, err := sec.Data()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: reading .eh_frame_hdr: %w", f.Name, err)
	}
	start, end, err = hdrAround(data, sec.Addr, vaddr)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: .eh_frame_hdr: %w", f.Name, err)
	}
	return start, end, nil
}

// hdrAround reads .eh_frame_hdr's bytes (at vaddr secAddr) for funcAround.
func hdrAround(data []byte, secAddr, vaddr uint64) (start, end uint64, err error) {
	const (
		udata4       = 0x03
		datarelSdata = 0x3b // DW_EH_PE_datarel | DW_EH_PE_sdata4
	)
	if len(data) < 12 || data[0] != 1 || data[1]&0x0f != udata4 && data[1]&0x0f != 0x0b || data[2] != udata4 || data[3] != datarelSdata {
		return 0, 0, fmt.Errorf("not in the form read here")
	}
	count := uint64(binary.LittleEndian.Uint32(data[8:]))
	table := data[12:]
	if count == 0 || count > uint64(len(table))/8 {
		return 0, 0, fmt.Errorf("%d functions claimed in %d bytes", count, len(table))
	}
	at := func(i uint64) uint64 {
		return secAddr + uint64(int64(int32(binary.LittleEndian.Uint32(table[i*8:]))))
	}
	i := uint64(sort.Search(int(count), func(i int) bool { return at(uint64(i)) > vaddr }))
	if i == 0 {
		return 0, 0, fmt.Errorf("%#x is before every function listed", vaddr)
	}
	start = at(i - 1)
	end = start + maxKeptFunc
	if i < count {
		end = at(i)
	}
	if end <= start || end-start > maxKeptFunc {
		return 0, 0, fmt.Errorf("the function at %#x holding %#x is not one it bounds", start, vaddr)
	}
	return start, end, nil
}

type insn struct {
	addr uint64
	x86asm.Inst
}

func (i insn) next() uint64 { return i.addr + uint64(i.Len) }

// decodeAll decodes a function's code, at vaddr base, instruction by
// instruction.
func decodeAll(code []byte, base uint64) ([]insn, error) {
	var out []insn
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return nil, fmt.Errorf("undecodable instruction at %#x", base+uint64(off))
		}
		out = append(out, insn{base + uint64(off), in})
		off += in.Len
	}
	return out, nil
}

// branchTarget is where a direct jump or call goes.
func branchTarget(in insn) (uint64, bool) {
	if rel, ok := in.Args[0].(x86asm.Rel); ok {
		return uint64(int64(in.next()) + int64(rel)), true
	}
	return 0, false
}

func isCondJump(op x86asm.Op) bool {
	switch op {
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JNE, x86asm.JG, x86asm.JGE,
		x86asm.JL, x86asm.JLE, x86asm.JO, x86asm.JNO, x86asm.JP, x86asm.JNP, x86asm.JS, x86asm.JNS:
		return true
	}
	return false
}

var calleeSaved = map[x86asm.Reg]bpf.StageKeptReg{
	x86asm.RBX: bpf.StageKeptRegKEPT_BX, x86asm.RBP: bpf.StageKeptRegKEPT_BP,
	x86asm.R12: bpf.StageKeptRegKEPT_R12, x86asm.R13: bpf.StageKeptRegKEPT_R13,
	x86asm.R14: bpf.StageKeptRegKEPT_R14, x86asm.R15: bpf.StageKeptRegKEPT_R15,
}

// keptBranch finds, in 3.10's _PyEval_Vector, the branch taken after the
// eval loop's call (the first indirect call: tstate->interp->eval_frame)
// when the frame's count is above 1: the count loaded through a
// callee-saved register (which holds f across the call), compared with 1,
// and a jg (the branch) or jle (the fall-through). Nothing else in the
// function may jump there, so that only that test reaches the probe.
func keptBranch(insns []insn) (uint64, bpf.StageKeptReg, error) {
	call := -1
	for i, in := range insns {
		if _, mem := in.Args[0].(x86asm.Mem); in.Op == x86asm.CALL && mem {
			call = i
			break
		}
	}
	if call < 0 {
		return 0, 0, fmt.Errorf("no indirect call (the eval loop's)")
	}
	var frameReg, countReg x86asm.Reg
	for i := call + 1; i < len(insns) && i <= call+4; i++ {
		in := insns[i]
		switch {
		case in.Op == x86asm.MOV && frameReg == 0:
			r, okR := in.Args[0].(x86asm.Reg)
			m, okM := in.Args[1].(x86asm.Mem)
			if okR && okM && m.Disp == 0 && m.Index == 0 && m.Segment == 0 && in.MemBytes == 8 {
				frameReg, countReg = m.Base, r
			}
		case in.Op == x86asm.CMP && frameReg == 0:
			// cmp qword [f], 1
			m, okM := in.Args[0].(x86asm.Mem)
			if okM && m.Disp == 0 && m.Index == 0 && in.Args[1] == x86asm.Imm(1) && in.MemBytes == 8 {
				frameReg, countReg = m.Base, 0
			}
			fallthrough
		case in.Op == x86asm.CMP:
			if frameReg == 0 || in.Args[1] != x86asm.Imm(1) || (countReg != 0 && in.Args[0] != countReg) {
				return 0, 0, fmt.Errorf("after the eval loop's call at %#x, %s is not the test of the frame's count", insns[call].addr, x86asm.GNUSyntax(in.Inst, in.addr, nil))
			}
			if i+1 >= len(insns) {
				return 0, 0, fmt.Errorf("the function ends after the test of the frame's count")
			}
			j := insns[i+1]
			to, ok := branchTarget(j)
			var at uint64
			switch {
			case ok && j.Op == x86asm.JG:
				at = to
			case ok && j.Op == x86asm.JLE:
				at = j.next()
			default:
				return 0, 0, fmt.Errorf("the test of the frame's count at %#x is followed by %s, not jg or jle", in.addr, x86asm.GNUSyntax(j.Inst, j.addr, nil))
			}
			reg, ok := calleeSaved[frameReg]
			if !ok {
				return 0, 0, fmt.Errorf("the frame is read through %s, which the call does not preserve", frameReg)
			}
			if err := reachedOnlyFrom(insns, at, j.addr); err != nil {
				return 0, 0, err
			}
			return at, reg, nil
		}
	}
	return 0, 0, fmt.Errorf("no test of the frame's count after the eval loop's call at %#x", insns[call].addr)
}

// reachedOnlyFrom checks that no instruction but the one at from jumps to
// at, and that at is an instruction of the function.
func reachedOnlyFrom(insns []insn, at, from uint64) error {
	found := false
	for i, in := range insns {
		if in.addr == at {
			found = true
			// Falling into it is reaching it too (through padding),
			// unless it is the branch's own fall-through.
			p := i - 1
			for p >= 0 && insns[p].Op == x86asm.NOP {
				p--
			}
			if p >= 0 && insns[p].addr != from && fallsThrough(insns[p]) {
				return fmt.Errorf("the kept-frame branch at %#x is also reached from %#x", at, insns[p].addr)
			}
		}
		if to, ok := branchTarget(in); ok && to == at && in.addr != from && in.Op != x86asm.CALL {
			return fmt.Errorf("the kept-frame branch at %#x is also reached from %#x", at, in.addr)
		}
	}
	if !found {
		return fmt.Errorf("the kept-frame branch at %#x is not an instruction of the function", at)
	}
	return nil
}

func fallsThrough(in insn) bool {
	switch in.Op {
	case x86asm.JMP, x86asm.RET, x86asm.UD2:
		return false
	}
	return true
}

// onlyCallTo finds the one call in insns to the imported function want;
// importAt names the import a call target (a PLT entry) or a GOT slot
// (call *slot(%rip)) stands for.
func onlyCallTo(insns []insn, want string, importAt func(uint64) string) (uint64, error) {
	var found []uint64
	for _, in := range insns {
		if in.Op != x86asm.CALL {
			continue
		}
		target, ok := branchTarget(in)
		if m, mem := in.Args[0].(x86asm.Mem); mem && m.Base == x86asm.RIP && m.Index == 0 {
			target, ok = uint64(int64(in.next())+m.Disp), true
		}
		if ok && importAt(target) == want {
			found = append(found, in.addr)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d calls to %s, want exactly one (take_ownership's copy of the frame)", len(found), want)
	}
	return found[0], nil
}

// importAt names the function a PLT entry at target jumps to, or a GOT
// slot at target holds, from the file's dynamic relocations; "" if none.
func importAt(f *elfsym.File, target uint64) string {
	if name := slotImport(f, target); name != "" {
		return name
	}
	off, ok := fileOffset(f, target)
	if !ok {
		return ""
	}
	stub := make([]byte, 16)
	if _, err := f.ReadAt(stub, int64(off)); err != nil {
		return ""
	}
	// A PLT entry jumps through its GOT slot first thing, after an endbr64
	// where the build has IBT (.plt.sec).
	for o, i := 0, 0; i < 2; i++ {
		in, err := x86asm.Decode(stub[o:], 64)
		if err != nil {
			return ""
		}
		o += in.Len
		if m, mem := in.Args[0].(x86asm.Mem); in.Op == x86asm.JMP && mem && m.Base == x86asm.RIP && m.Index == 0 {
			return slotImport(f, uint64(int64(target)+int64(o)+m.Disp))
		}
	}
	return ""
}

// slotImport names the symbol whose address the dynamic linker writes to
// the GOT slot at addr (a JUMP_SLOT or GLOB_DAT relocation), or "".
func slotImport(f *elfsym.File, addr uint64) string {
	syms, err := f.DynamicSymbols()
	if err != nil {
		return ""
	}
	for _, name := range []string{".rela.plt", ".rela.dyn"} {
		sec := f.Section(name)
		if sec == nil || sec.Type != elf.SHT_RELA {
			continue
		}
		data, err := sec.Data()
		if err != nil {
			continue
		}
		for i := 0; i+24 <= len(data); i += 24 {
			off := binary.LittleEndian.Uint64(data[i:])
			info := binary.LittleEndian.Uint64(data[i+8:])
			typ, idx := elf.R_X86_64(info&0xffffffff), info>>32
			if off != addr || (typ != elf.R_X86_64_JMP_SLOT && typ != elf.R_X86_64_GLOB_DAT) {
				continue
			}
			// DynamicSymbols leaves out the null symbol at index 0.
			if idx >= 1 && idx <= uint64(len(syms)) {
				return syms[idx-1].Name
			}
		}
	}
	return ""
}
