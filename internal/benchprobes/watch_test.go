package benchprobes

import (
	"os"
	"testing"
	"unsafe"
)

var watched [2]uint64

// The empty watchpoint program runs on this process's own writes and
// leaves nothing behind when closed.
func TestArmBareWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: loads BPF and opens hardware watchpoints")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads BPF and opens hardware watchpoints")
	}
	addr := uint64(uintptr(unsafe.Pointer(&watched[0])))
	if _, err := ArmBareWatch(os.Getpid(), addr+1); err == nil {
		t.Error("an unaligned address was accepted")
	}
	w, err := ArmBareWatch(os.Getpid(), addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		watched[0] = uint64(i)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
