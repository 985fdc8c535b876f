package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/specprobe/specprobe/discover"
	"github.com/specprobe/specprobe/internal/elfsym"
	"github.com/specprobe/specprobe/internal/procfs"
	"github.com/specprobe/specprobe/internal/safefile"
	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/pyproc"
)

func TestReasonOf(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		err  error
		ctx  context.Context
		want string
	}{
		{nil, live, ""},
		{errors.New("interpreter starting"), live, ""},
		{fmt.Errorf("x: %w", pyproc.ErrBudget), live, reasonBudget},
		{fmt.Errorf("x: %w", pyproc.ErrBudget), done, reasonDeadline},
		{fmt.Errorf("x: %w", pyproc.ErrScanTooLarge), live, reasonDictTooLarge},
		{fmt.Errorf("x: %w", pyproc.ErrCorrupt), live, reasonCorrupt},
		{fmt.Errorf("x: %w", elfsym.ErrInvalid), live, reasonBadELF},
		{fmt.Errorf("x: %w", safefile.ErrSymlink), live, reasonPathSwapped},
		{fmt.Errorf("x: %w", pyproc.ErrUnsupported), live, reasonUnsupported},
		{fmt.Errorf("spec.yaml: %w", &loader.MissingNameError{Names: []string{"model_worker_batch"}}), live, reasonSpecMismatch},
	} {
		if got := reasonOf(tc.err, tc.ctx); got != tc.want {
			t.Errorf("reasonOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestRejectBackoffGrows(t *testing.T) {
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := rejectBackoff(i + 1); got != w {
			t.Errorf("strike %d: %s, want %s", i+1, got, w)
		}
	}
}

func TestExecLoop(t *testing.T) {
	h := &history{}
	now := time.Now()
	for i := range 20 {
		if h.execLoop(now.Add(time.Duration(i) * time.Millisecond)) {
			t.Fatalf("exec %d counted as a loop", i+1)
		}
	}
	if !h.execLoop(now.Add(30 * time.Millisecond)) {
		t.Error("21 execs in 30ms not counted as a loop")
	}
	if h.execLoop(now.Add(11 * time.Second)) {
		t.Error("an exec after a quiet window counted as a loop")
	}
}

// TestExecTokens: one user's storm empties its own bucket, not another's,
// and the bucket refills with time.
func TestExecTokens(t *testing.T) {
	d := &Daemon{execBuckets: map[execKey]*bucket{}}
	now := time.Now()
	storm, other := execKey{1000, "/user.slice"}, execKey{0, "/"}
	n := 0
	for d.execTokens(storm, now) {
		n++
	}
	if n != execBurst {
		t.Errorf("burst of %d, want %d", n, execBurst)
	}
	if !d.execTokens(other, now) {
		t.Error("another user's exec refused during the storm")
	}
	if !d.execTokens(storm, now.Add(50*time.Millisecond)) {
		t.Error("no token after 50ms at 100/s")
	}
}

// TestDispatchTurns: with one user's many candidates due, another user's
// single candidate still gets a worker, and one user holds at most
// perUIDWorkers.
func TestDispatchTurns(t *testing.T) {
	d := demoDaemon(t)
	d.ctx = context.Background()
	now := time.Now()
	// PIDs past the limit: no such process, so each look ends at once.
	for pid := procfs.MaxPID + 1; pid <= procfs.MaxPID+10; pid++ {
		d.cands[pid] = &candidate{id: discover.ID{PID: pid}, uid: 1000, next: now.Add(-time.Second)}
	}
	root := &candidate{id: discover.ID{PID: procfs.MaxPID + 100}, uid: 0, next: now}
	d.cands[root.id.PID] = root
	d.mu.Lock()
	d.dispatchLocked(now)
	d.mu.Unlock()
	if !root.busy {
		t.Error("root's candidate got no worker while another user's ten were due")
	}
	if d.busyUID[1000] != perUIDWorkers || d.working != perUIDWorkers+1 {
		t.Errorf("workers: %d for uid 1000, %d in all; want %d and %d", d.busyUID[1000], d.working, perUIDWorkers, perUIDWorkers+1)
	}
	for range d.working {
		<-d.looks
	}
}
