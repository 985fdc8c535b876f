package loader

import "testing"

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
