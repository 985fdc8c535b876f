package integration

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/specprobe/specprobe/bpf"
)

// ourPrograms are the names of bpf/'s programs as the kernel keeps them
// (truncated to 15 characters).
func ourPrograms(t *testing.T) map[string]bool {
	names := map[string]bool{}
	for _, load := range []func() (*ebpf.CollectionSpec, error){bpf.LoadStage, bpf.LoadExec} {
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		for n := range spec.Programs {
			names[n[:min(len(n), 15)]] = true
		}
	}
	return names
}

// assertNoProbesLeft walks every BPF program and link in the kernel and fails
// if one of ours is still there, so a detach that leaks is caught.
func assertNoProbesLeft(t *testing.T) {
	t.Helper()
	// The kernel frees a program whose last link closed from a work queue,
	// a moment after the close: look again for a while before failing.
	for deadline := time.Now().Add(2 * time.Second); ; {
		left := leftPrograms(t)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, l := range left {
				t.Errorf("BPF program %s still loaded after detach", l)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	assertNoLinksLeft(t)
}

func leftPrograms(t *testing.T) []string {
	var left []string
	ours := ourPrograms(t)
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			t.Fatalf("listing BPF programs: %v", err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			continue
		}
		if ours[info.Name] {
			left = append(left, fmt.Sprintf("%s (id %d)", info.Name, id))
		}
	}
	return left
}

func assertNoLinksLeft(t *testing.T) {
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Take().Info()
		if err != nil {
			continue
		}
		if info.Type == link.UprobeMultiType || info.Type == link.PerfEventType {
			if p, err := ebpf.NewProgramFromID(info.Program); err == nil {
				pi, _ := p.Info()
				p.Close()
				if pi != nil && strings.HasPrefix(pi.Name, "stage_") {
					t.Errorf("link %d of program %s still attached after detach", info.ID, pi.Name)
				}
			}
		}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("listing BPF links: %v", err)
	}
}
