package pyproc

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read is one segment of a vectored read: Buf is filled from Addr.
type Read struct {
	Addr uint64
	Buf  []byte
	// Err is set when the segment could not be read whole (unmapped, short).
	Err error
}

// VectorMemory is a Memory that reads many segments in one call.
type VectorMemory interface {
	Memory
	// ReadV reads every segment it can: one that fails gets its Err and
	// does not keep the others from being read. It returns the first
	// segment error, nil when every segment was read whole.
	ReadV(rs []Read) error
}

// readV reads rs through m, one segment at a time when m cannot do better
// (the fakes tests use).
func readV(m Memory, rs []Read) error {
	if v, ok := m.(VectorMemory); ok {
		return v.ReadV(rs)
	}
	var first error
	for i := range rs {
		rs[i].Err = nil
		if len(rs[i].Buf) > 0 {
			rs[i].Err = m.ReadAt(rs[i].Buf, rs[i].Addr)
		}
		if first == nil {
			first = rs[i].Err
		}
	}
	return first
}

// iovMax is IOV_MAX: process_vm_readv refuses more iovecs in one call.
const iovMax = 1024

// ReadV reads rs with process_vm_readv, 1,024 iovecs (IOV_MAX) a call.
// The kernel stops at the first remote iovec it cannot read and reports
// how many bytes it copied up to there, so the segment there gets the
// error and the rest are submitted again.
func (m *procMemory) ReadV(rs []Read) error {
	live := make([]*Read, 0, len(rs))
	for i := range rs {
		rs[i].Err = nil
		if len(rs[i].Buf) > 0 {
			live = append(live, &rs[i])
		}
	}
	for len(live) > 0 && !m.noVMRdv {
		live = live[m.readvOnce(live[:min(len(live), iovMax)]):]
	}
	for _, r := range live { // process_vm_readv refused: /proc/PID/mem
		r.Err = m.ReadAt(r.Buf, r.Addr)
	}
	for i := range rs {
		if rs[i].Err != nil {
			return rs[i].Err
		}
	}
	return nil
}

// readvOnce submits rs in one call and returns how many of them are
// settled (read, or given their error); 0 when the call was refused.
func (m *procMemory) readvOnce(rs []*Read) int {
	local := make([]unix.Iovec, len(rs))
	remote := make([]unix.RemoteIovec, len(rs))
	for i, r := range rs {
		local[i].Base = unsafe.SliceData(r.Buf)
		local[i].SetLen(len(r.Buf))
		remote[i] = unix.RemoteIovec{Base: uintptr(r.Addr), Len: len(r.Buf)}
	}
	m.count()
	n, err := unix.ProcessVMReadv(m.pid, local, remote, 0)
	switch {
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
		m.noVMRdv = true
		return 0
	case errors.Is(err, unix.EFAULT):
		n = 0 // nothing copied: the first segment is unreadable
	case err != nil: // the process is gone, or the kernel is out of memory
		for _, r := range rs {
			r.Err = fmt.Errorf("read %#x (%d bytes): %w", r.Addr, len(r.Buf), err)
		}
		return len(rs)
	}
	for i, r := range rs {
		if n < len(r.Buf) {
			if n > 0 {
				r.Err = fmt.Errorf("read %#x: short read (%d of %d bytes)", r.Addr, n, len(r.Buf))
			} else {
				r.Err = fmt.Errorf("read %#x (%d bytes): %w", r.Addr, len(r.Buf), unix.EFAULT)
			}
			return i + 1
		}
		n -= len(r.Buf)
	}
	return len(rs)
}
