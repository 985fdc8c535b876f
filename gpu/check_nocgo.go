//go:build !cgo

package gpu

import (
	"errors"
	"io"
	"time"
)

// CheckOptions drive the device check (cmd/gpucheck, scripts/gpu-check.sh).
type CheckOptions struct {
	Options
	PID      int
	Duration time.Duration
}

// Check needs NVML, which needs cgo.
func Check(io.Writer, CheckOptions) error {
	return errors.New("built without cgo: NVML needs it (build with CGO_ENABLED=1)")
}

// Describe says why GPU state is off in a build without cgo.
func Describe() (ok bool, detail string) {
	return false, "built without cgo: no NVML, spans get no GPU state (build with CGO_ENABLED=1)"
}
