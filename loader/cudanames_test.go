package loader

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/specprobe/specprobe/internal/elfsym"
)

// The probed set: every base name and its versioned and per-thread-stream
// variants; nothing asynchronous, no query, no look-alike.
func TestCUDAProbeKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind CUDAKind
		ok   bool
	}{
		{"cuStreamSynchronize", CUDASync, true},
		{"cuStreamSynchronize_ptsz", CUDASync, true},
		{"cuCtxSynchronize", CUDASync, true},
		{"cuCtxSynchronize_v2", CUDASync, true},
		{"cuEventSynchronize", CUDASync, true},
		{"cuMemcpyDtoH_v2", CUDASync, true},
		{"cuMemcpyDtoH_v2_ptds", CUDASync, true},
		{"cuMemcpy", CUDASync, true},
		{"cuMemcpy_ptds", CUDASync, true},
		{"cuLaunchKernel", CUDALaunch, true},
		{"cuLaunchKernel_ptsz", CUDALaunch, true},
		{"cuLaunchKernelEx", CUDALaunch, true},
		{"cuLaunchKernelEx_ptsz", CUDALaunch, true},
		{"cuLaunchCooperativeKernel_ptsz", CUDALaunch, true},
		{"cuGraphLaunch", CUDAGraph, true},
		{"cuGraphLaunch_ptsz", CUDAGraph, true},
		{"cuMemcpyDtoHAsync_v2", 0, false},
		{"cuMemcpyDtoHAsync_v2_ptsz", 0, false},
		{"cuMemcpyHtoD_v2", 0, false},
		{"cuMemcpyAsync", 0, false},
		{"cuStreamQuery", 0, false},
		{"cuEventQuery", 0, false},
		{"cuEventRecord", 0, false},
		{"cuStreamWaitEvent", 0, false},
		{"cuLaunchCooperativeKernelMultiDevice", 0, false},
		{"cuLaunchHostFunc", 0, false},
		{"cuGraphLaunchX", 0, false},
		{"cuStreamSynchronize_v", 0, false},
		{"cuStreamSynchronize_v2_ptsz_ptsz", 0, false},
		{"xcuStreamSynchronize", 0, false},
		{"cuGetProcAddress", 0, false},
	} {
		kind, ok := cudaProbeKind(tc.name)
		if ok != tc.ok || (ok && kind != tc.kind) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, kind, ok, tc.kind, tc.ok)
		}
	}
}

// buildSO compiles C source into a shared object in a temporary directory.
func buildSO(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "lib.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(dir, "libcuda.so.1")
	if out, err := exec.Command("gcc", "-O0", "-fPIC", "-shared", "-o", so, c).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v\n%s", err, out)
	}
	return so
}

// The stand-in driver the integration tests use: one probe per address
// (an alias shares its target's), asynchronous copies left out.
func TestCUDAProbesOfDriver(t *testing.T) {
	src, err := os.ReadFile("../integration/testdata/fakecuda.c")
	if err != nil {
		t.Fatal(err)
	}
	f, err := elfsym.OpenPath(buildSO(t, string(src)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := cudaProbes(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, fmt.Sprintf("%s:%s", strings.Join(p.Names, "="), p.Kind))
	}
	want := []string{"cuCtxSynchronize:sync", "cuEventSynchronize:sync", "cuGraphLaunch:graph launch",
		"cuLaunchKernel=cuLaunchKernel_ptsz:launch", "cuLaunchKernelEx:launch", "cuMemcpyDtoH_v2:sync",
		"cuStreamSynchronize=cuStreamSynchronize_ptsz:sync"}
	if !slices.Equal(names, want) {
		t.Errorf("probes %q\nwant %q", names, want)
	}
}

// A library posing as the driver with more matching entry points than any
// driver has is refused, not probed at every one.
func TestCUDAProbesForged(t *testing.T) {
	// 100 versions x 2 suffixes of distinct bodies: 200 entry points, under the bound...
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "int cuLaunchKernel_v%d_ptsz(void) { return %d; }\nint cuLaunchKernel_v%d_ptds(void) { return %d; }\n", i, i, i, -i)
	}
	f, err := elfsym.OpenPath(buildSO(t, b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cudaProbes(f); err != nil || len(got) != 200 {
		t.Errorf("200 entry points: %d probes, %v", len(got), err)
	}
	f.Close()
	// ...and 80 more past it.
	for _, base := range []string{"cuStreamSynchronize", "cuEventSynchronize"} {
		for i := range 40 {
			fmt.Fprintf(&b, "int %s_v%d(void) { return %d; }\n", base, i, 1000+i)
		}
	}
	g, err := elfsym.OpenPath(buildSO(t, b.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := cudaProbes(g); err == nil || !strings.Contains(err.Error(), "more than 256") {
		t.Errorf("280 entry points: %v, want refused", err)
	}
}
