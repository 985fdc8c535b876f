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
