package loader

import (
	"regexp"
	"strings"
)

// CUDAKind is what a probe on a CUDA driver entry point counts.
type CUDAKind uint8

const (
	CUDASync   CUDAKind = iota // blocks the thread until GPU work is done: timed
	CUDALaunch                 // launches a kernel: counted
	CUDAGraph                  // launches a graph: counted
)

func (k CUDAKind) String() string {
	return [...]string{"sync", "launch", "graph launch"}[k]
}

// cudaBases are the driver functions probed, by the name the CUDA headers
// give them. The runtime (libcudart, torch) finds driver entry points
// through cuGetProcAddress, which hands out whichever version the driver
// has: cuStreamSynchronize, cuStreamSynchronize_ptsz (per-thread default
// stream), cuMemcpyDtoH_v2, cuCtxSynchronize_v2. Every exported name that
// is a base here plus such a suffix is probed (cudaProbeKind), so a
// driver that adds a version is followed without a change here.
//
// Syncs are the calls that block the host until the GPU has done queued
// work: a stream, an event, the context, and synchronous copies to host
// memory (cuMemcpyDtoH; cuMemcpy, which is synchronous for device to
// host). Asynchronous copies, queries (cuStreamQuery, cuEventQuery) and
// waits queued on the GPU (cuStreamWaitEvent) do not block the host.
var cudaBases = map[string]CUDAKind{
	"cuCtxSynchronize":          CUDASync,
	"cuStreamSynchronize":       CUDASync,
	"cuEventSynchronize":        CUDASync,
	"cuMemcpyDtoH":              CUDASync,
	"cuMemcpy":                  CUDASync,
	"cuLaunchKernel":            CUDALaunch,
	"cuLaunchKernelEx":          CUDALaunch,
	"cuLaunchCooperativeKernel": CUDALaunch,
	"cuGraphLaunch":             CUDAGraph,
}

// cudaVariant is a version suffix, then a default-stream suffix: _v2,
// _ptsz, _ptds, _v2_ptds.
var cudaVariant = regexp.MustCompile(`^(_v[0-9]{1,2})?(_pt(sz|ds))?$`)

// cudaProbeKind tells whether an exported libcuda name is probed, and how.
func cudaProbeKind(name string) (CUDAKind, bool) {
	if !strings.HasPrefix(name, "cu") || len(name) > 64 {
		return 0, false
	}
	// The longest base that name begins with and whose rest is a variant
	// suffix: cuLaunchKernelEx_ptsz is cuLaunchKernelEx's, cuMemcpyDtoH's
	// rest after cuMemcpy ("DtoH") is no suffix.
	best, kind := "", CUDAKind(0)
	for base, k := range cudaBases {
		if len(base) > len(best) && strings.HasPrefix(name, base) && cudaVariant.MatchString(name[len(base):]) {
			best, kind = base, k
		}
	}
	return kind, best != ""
}
