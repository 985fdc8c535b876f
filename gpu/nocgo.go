//go:build !cgo

package gpu

import "errors"

// Open returns a sampler that reports, at Start, that this build cannot use
// NVML: go-nvml needs cgo to open libnvidia-ml.so.1.
func Open(opts Options) *Sampler { return newSampler(noNVML{}, opts) }

type noNVML struct{}

func (noNVML) open() ([]Device, error) {
	return nil, errors.New("this specprobe was built without cgo, which NVML needs")
}
func (noNVML) pids(int) ([]uint32, error)    { return nil, nil }
func (noNVML) fast(int, *Sample, bool, bool) {}
func (noNVML) slow(int, *Sample)             {}
func (noNVML) gpm(int, *Sample) bool         { return false }
func (noNVML) close()                        {}
