package tracer

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/spanbuilder"
	"github.com/specprobe/specprobe/spanschema"
)

// findCUDA finds the CUDA driver pid maps, to probe its syncs and
// launches; a process without one, or with one specprobe cannot read, gets
// none of it and one line saying so: tracing goes on.
func findCUDA(cfg Config, pid int) *loader.CUDATarget {
	if cfg.NoCUDA {
		return nil
	}
	t, err := loader.FindCUDA(pid)
	switch {
	case errors.Is(err, loader.ErrNoCUDA):
		fmt.Fprintf(cfg.Log, "specprobe: CUDA: libcuda.so.1 not mapped by PID %d: no GPU wait/launch fields\n", pid)
	case err != nil:
		fmt.Fprintf(cfg.Log, "specprobe: CUDA: %v: no GPU wait/launch fields\n", err)
	}
	return t
}

// describeCUDA says what was armed in the driver.
func describeCUDA(w io.Writer, t *loader.CUDATarget, launches bool) {
	if t == nil {
		return
	}
	what := "time blocked in syncs and launches"
	if !launches {
		what = "time blocked in syncs (--cuda-launches=false)"
	}
	fmt.Fprintf(w, "  CUDA driver %s: %s\n", t.File.Path, what)
	for _, l := range t.Describe(launches) {
		fmt.Fprintf(w, "    %s\n", l)
	}
}

// cudaLine is the live line's and the summary's CUDA part: per stage, the
// time its threads blocked in syncs and what they launched, then the same
// for the steps outside their stages; "" without CUDA probes.
func cudaLine(st *spanbuilder.Stats) string {
	if len(st.CUDA) == 0 {
		return ""
	}
	var parts []string
	for _, key := range slices.Concat(spanschema.Stages, []string{spanbuilder.OutsideStages}) {
		u, ok := st.CUDA[key]
		if !ok || key == spanschema.Accept {
			continue
		}
		p := fmt.Sprintf("%s sync %s/%d", key, u.Sync.Round(time.Microsecond), u.Syncs)
		if u.Launches+u.Graphs > 0 {
			p += fmt.Sprintf(" launches %d", u.Launches)
			if u.Graphs > 0 {
				p += fmt.Sprintf("+%d graphs", u.Graphs)
			}
		}
		parts = append(parts, p)
	}
	return "cuda: " + strings.Join(parts, ", ")
}
