// Package pyproc finds objects inside an unmodified running CPython process by
// reading its memory from outside, the way py-spy does: it locates _PyRuntime,
// walks sys.modules to a function and returns the address of its code object,
// which is where a hardware watchpoint goes.
package pyproc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Memory is anything that can copy bytes out of the target's address space.
// Tests feed the readers random bytes through it.
type Memory interface {
	ReadAt(p []byte, addr uint64) error
}

// maxRead caps one read: no object we look at is larger, so a bigger request
// means a corrupt length field.
const maxRead = 1 << 20

// procMemory reads another process. process_vm_readv copies without a file
// descriptor per call; /proc/PID/mem is the fallback when it is refused
// (seccomp, kernels built without CONFIG_CROSS_MEMORY_ATTACH).
type procMemory struct {
	pid     int
	file    *os.File
	noVMRdv bool
	reads   *int // where each system call that reads the target is counted (Stats.Reads)
}

func (m *procMemory) count() {
	if m.reads != nil {
		*m.reads++
	}
}

func newProcMemory(pid int) *procMemory { return &procMemory{pid: pid} }

func (m *procMemory) ReadAt(p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	if !m.noVMRdv {
		local := []unix.Iovec{{Base: &p[0]}}
		local[0].SetLen(len(p))
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}
		m.count()
		n, err := unix.ProcessVMReadv(m.pid, local, remote, 0)
		switch {
		case err == nil && n == len(p):
			return nil
		case err == nil:
			return fmt.Errorf("read %#x: short read (%d of %d bytes)", addr, n, len(p))
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			m.noVMRdv = true
		default:
			return fmt.Errorf("read %#x (%d bytes): %w", addr, len(p), err)
		}
	}
	if m.file == nil {
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", m.pid))
		if err != nil {
			return err
		}
		m.file = f
	}
	// The offset is the address; addresses above 2^63 never reach here (checked by callers).
	m.count()
	n, err := m.file.ReadAt(p, int64(addr))
	if n == len(p) {
		return nil
	}
	return fmt.Errorf("read %#x (%d bytes): %v", addr, len(p), err)
}

func (m *procMemory) Close() error {
	if m.file != nil {
		return m.file.Close()
	}
	return nil
}

// mem wraps a Memory with the checks every read needs.
type mem struct {
	r Memory
}

// validAddr says whether a could be a user-space pointer on x86-64/arm64:
// non-null, above the zero page, below the canonical user limit.
func validAddr(a uint64) bool {
	return a >= 0x1000 && a < 0x0000_8000_0000_0000
}

// validObj adds the alignment every PyObject has (malloc and static data are
// 8-aligned), which rejects most garbage words.
func validObj(a uint64) bool {
	return validAddr(a) && a%8 == 0
}

func (m mem) bytes(addr uint64, n int) ([]byte, error) {
	if n < 0 || n > maxRead {
		return nil, fmt.Errorf("read of %d bytes at %#x: size out of range", n, addr)
	}
	if !validAddr(addr) || !validAddr(addr+uint64(n)) {
		return nil, fmt.Errorf("bad address %#x", addr)
	}
	b := make([]byte, n)
	if err := m.r.ReadAt(b, addr); err != nil {
		return nil, err
	}
	return b, nil
}

func (m mem) u64(addr uint64) (uint64, error) {
	var b [8]byte
	if !validAddr(addr) {
		return 0, fmt.Errorf("bad address %#x", addr)
	}
	if err := m.r.ReadAt(b[:], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func (m mem) u32(addr uint64) (uint32, error) {
	var b [4]byte
	if !validAddr(addr) {
		return 0, fmt.Errorf("bad address %#x", addr)
	}
	if err := m.r.ReadAt(b[:], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func (m mem) u8(addr uint64) (uint8, error) {
	var b [1]byte
	if !validAddr(addr) {
		return 0, fmt.Errorf("bad address %#x", addr)
	}
	if err := m.r.ReadAt(b[:], addr); err != nil {
		return 0, err
	}
	return b[0], nil
}

// ptr reads a pointer that must lead to an object; null is an error.
func (m mem) ptr(addr uint64) (uint64, error) {
	p, err := m.u64(addr)
	if err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, fmt.Errorf("no object where one was expected (NULL at %#x)", addr)
	}
	if !validObj(p) {
		return 0, fmt.Errorf("bad pointer %#x at %#x", p, addr)
	}
	return p, nil
}

// optPtr is ptr where null is a legal "absent" (func_dict, ma_values).
func (m mem) optPtr(addr uint64) (uint64, error) {
	p, err := m.u64(addr)
	if err != nil || p == 0 {
		return 0, err
	}
	if !validObj(p) {
		return 0, fmt.Errorf("bad pointer %#x at %#x", p, addr)
	}
	return p, nil
}

// block is a chunk read once and decoded locally: one syscall instead of one
// per field for headers we need several fields of.
type block struct {
	addr uint64
	b    []byte
}

func (m mem) block(addr uint64, n int) (block, error) {
	b, err := m.bytes(addr, n)
	return block{addr, b}, err
}

func (b block) u64(off uint64) uint64 {
	if off+8 > uint64(len(b.b)) {
		return 0
	}
	return binary.LittleEndian.Uint64(b.b[off:])
}

func (b block) u32(off uint64) uint32 {
	if off+4 > uint64(len(b.b)) {
		return 0
	}
	return binary.LittleEndian.Uint32(b.b[off:])
}

func (b block) u8(off uint64) uint8 {
	if off >= uint64(len(b.b)) {
		return 0
	}
	return b.b[off]
}
