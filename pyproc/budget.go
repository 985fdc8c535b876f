package pyproc

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrBudget is returned by reads past a Budget, or after its context ended.
var ErrBudget = errors.New("read budget exceeded")

// Budget bounds the reads made through the Memory it wraps: their number,
// their bytes, and the time (a context), until the next Reset. The daemon
// gives each look at a process one budget, so that a process whose memory
// was built to make reads endless costs a bounded amount and is skipped.
type Budget struct {
	mu                 sync.Mutex
	ctx                context.Context
	reads, bytes       int64
	maxReads, maxBytes int64
}

// NewBudget allows maxReads reads of maxBytes bytes in all per Reset.
func NewBudget(maxReads, maxBytes int64) *Budget {
	return &Budget{ctx: context.Background(), maxReads: maxReads, maxBytes: maxBytes}
}

// Reset starts a new allowance that also ends with ctx.
func (b *Budget) Reset(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ctx, b.reads, b.bytes = ctx, 0, 0
}

// Used returns the reads and bytes since the last Reset.
func (b *Budget) Used() (reads, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads, b.bytes
}

// take accounts for one read of n bytes.
func (b *Budget) take(n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrBudget, err)
	}
	if b.reads >= b.maxReads || b.bytes+int64(n) > b.maxBytes {
		return fmt.Errorf("%w: %d reads, %d bytes (at most %d reads, %d bytes)", ErrBudget, b.reads, b.bytes, b.maxReads, b.maxBytes)
	}
	b.reads++
	b.bytes += int64(n)
	return nil
}

// Wrap returns m with every read counted against b.
func (b *Budget) Wrap(m Memory) Memory { return budgeted{m, b} }

type budgeted struct {
	m Memory
	b *Budget
}

func (r budgeted) ReadAt(p []byte, addr uint64) error {
	if err := r.b.take(len(p)); err != nil {
		return err
	}
	return r.m.ReadAt(p, addr)
}

// AttachWith is Attach with every read of the target's memory going
// through wrap (a Budget's Wrap).
func AttachWith(pid int, wrap func(Memory) Memory) (*Process, error) {
	return attachPID(pid, wrap)
}
