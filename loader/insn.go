package loader

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"golang.org/x/arch/x86/x86asm"
)

var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// ProbeOffset decides where in a function the probe goes. A function that
// starts with endbr64 (built with -fcf-protection) is probed just after it:
// the kernel must single-step endbr64, which costs ten times an emulated
// instruction (docs/design.md), and skipping it changes nothing a probe can see.
// The instruction after it is decoded to be sure the skip lands on an
// instruction boundary inside the function.
func ProbeOffset(path string, sym *Symbol, skipEndbr bool) (off uint64, first string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	return probeOffset(f, sym, skipEndbr)
}

func probeOffset(f io.ReaderAt, sym *Symbol, skipEndbr bool) (off uint64, first string, err error) {
	code := make([]byte, 32)
	n, err := f.ReadAt(code, int64(sym.Offset))
	if n < len(endbr64)+1 {
		return 0, "", fmt.Errorf("reading the first instruction of %s: %v", sym.Demangled, err)
	}
	code = code[:n]
	if !bytes.HasPrefix(code, endbr64) {
		return sym.Offset, describe(code), nil
	}
	if !skipEndbr || sym.Size <= uint64(len(endbr64)) {
		return sym.Offset, "endbr64", nil
	}
	if _, err := x86asm.Decode(code[len(endbr64):], 64); err != nil {
		return sym.Offset, "endbr64", nil // not sure what follows: stay on the safe entry
	}
	return sym.Offset + uint64(len(endbr64)), "endbr64; " + describe(code[len(endbr64):]), nil
}

func describe(code []byte) string {
	inst, err := x86asm.Decode(code, 64)
	if err != nil {
		return fmt.Sprintf("undecodable (% x)", code[:4])
	}
	return x86asm.GNUSyntax(inst, 0, nil)
}
