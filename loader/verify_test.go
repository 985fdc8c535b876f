package loader

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Every program attach loads passes this kernel's verifier: the kernel
// matrix (scripts/vm) runs this on each kernel it boots.
func TestVerifyPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: loads BPF programs")
	}
	if err := CheckPrivileges(); err != nil {
		t.Skipf("needs root or CAP_BPF+CAP_PERFMON to load BPF programs: %v", err)
	}
	if err := VerifyPrograms(); err != nil {
		t.Fatal(err)
	}
}

// A program the verifier refuses is named, with the kernel and the
// verifier's reason.
func TestVerifierErrorNamesProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: loads BPF programs")
	}
	if err := CheckPrivileges(); err != nil {
		t.Skipf("needs root or CAP_BPF+CAP_PERFMON to load BPF programs: %v", err)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"no_result": {
		Name: "no_result", Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{asm.Return()}, // R0 never set
	}}}
	var objs struct {
		P *ebpf.Program `ebpf:"no_result"`
	}
	err := spec.LoadAndAssign(&objs, nil)
	if err == nil {
		objs.P.Close()
		t.Fatal("the verifier passed a program that returns no value")
	}
	var u unix.Utsname
	_ = unix.Uname(&u)
	got := verifierError(err).Error()
	for _, want := range []string{"Linux " + unix.ByteSliceToString(u.Release[:]), "refuses program no_result:", "R0 !read_ok"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
	if strings.Contains(got, "load program:") {
		t.Errorf("%q repeats cilium/ebpf's wrapping", got)
	}
}
