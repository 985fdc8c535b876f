package loader

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/specprobe/specprobe/bpf"
)

// VerifyPrograms loads every BPF program attach and the daemon load (and
// kept.c's, on the stage programs' maps, as a Python 3.10 or 3.11 target
// gets them), in each variant they are loaded in (the stage programs without and with the
// CUDA counters, which the verifier checks as different code), and unloads
// them. The kernel's verifier is the only judge of whether a program loads:
// a feature check that passes says nothing of a program the verifier then
// refuses on that kernel (a bound it cannot prove, a call chain's stack).
func VerifyPrograms() error {
	if err := CheckPrivileges(); err != nil {
		return err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}
	for _, opts := range []Options{{Python: true}, {Python: true, CUDA: &CUDATarget{}}} {
		spec, err := sessionSpec(opts)
		if err != nil {
			return err
		}
		var objs bpf.StageObjects
		if err := loadCollection(spec, &objs, nil); err != nil {
			return err
		}
		kept, err := loadKept(&objs.StageMaps, opts)
		if err == nil {
			kept.Close()
		}
		objs.Close()
		if err != nil {
			return err
		}
	}
	var execs bpf.ExecObjects
	if err := bpf.LoadExecObjects(&execs, nil); err != nil {
		return verifierError(err)
	}
	return execs.Close()
}

// verifierError names the kernel and the program with a load error: what
// the verifier accepts differs from one kernel to the next.
func verifierError(err error) error {
	var u unix.Utsname
	_ = unix.Uname(&u)
	kernel := "Linux " + unix.ByteSliceToString(u.Release[:])
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%s: %w", kernel, explainLoadError(err))
	}
	prog := "a program"
	if m := programName.FindStringSubmatch(err.Error()); m != nil {
		prog = "program " + m[1]
	}
	reason := ve.Error()
	if ve.Cause != nil {
		reason = strings.TrimPrefix(reason, "load program: "+ve.Cause.Error()+": ")
	}
	return fmt.Errorf("%s: the BPF verifier refuses %s: %s", kernel, prog, reason)
}

var programName = regexp.MustCompile(`program (\w+): load program`)
