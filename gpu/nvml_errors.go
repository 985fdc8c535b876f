//go:build cgo

package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// initError explains a failed Init without calling into NVML again.
func initError(r nvml.Return) error {
	switch r {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine")
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("NVML: the NVIDIA driver is not loaded")
	case nvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("NVML: no permission to open the GPUs")
	}
	return fmt.Errorf("NVML Init failed: %s", retName(r))
}

// retName names a return code from a table of our own, never through
// nvmlErrorString, so it is safe whatever state the library is in.
func retName(r nvml.Return) string {
	names := map[nvml.Return]string{
		nvml.ERROR_UNINITIALIZED: "uninitialized", nvml.ERROR_INVALID_ARGUMENT: "invalid argument",
		nvml.ERROR_NOT_SUPPORTED: "not supported", nvml.ERROR_NO_PERMISSION: "no permission",
		nvml.ERROR_NOT_FOUND: "not found", nvml.ERROR_INSUFFICIENT_SIZE: "insufficient size",
		nvml.ERROR_DRIVER_NOT_LOADED: "driver not loaded", nvml.ERROR_TIMEOUT: "timeout",
		nvml.ERROR_LIBRARY_NOT_FOUND: "library not found", nvml.ERROR_FUNCTION_NOT_FOUND: "function not found",
		nvml.ERROR_GPU_IS_LOST: "GPU is lost", nvml.ERROR_LIB_RM_VERSION_MISMATCH: "driver/library version mismatch",
		nvml.ERROR_UNKNOWN: "unknown error",
	}
	if n, ok := names[r]; ok {
		return n
	}
	return fmt.Sprintf("NVML return %d", int32(r))
}
