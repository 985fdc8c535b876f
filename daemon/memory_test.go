package daemon

import "testing"

// The ring buffers and span queues of all the sessions the daemon may run at
// once fit in their shares of the limit, and the Go limit leaves room for
// the rings.
func TestBudgets(t *testing.T) {
	const MiB = 1 << 20
	for _, c := range []struct {
		limit            int64
		procs, exporters int
		queue            int
		ring             uint32
		goLimit          int64
	}{
		{0, 16, 1, 8192, 1 * MiB, 0}, // sized as for 256 MiB, no Go limit
		{200 * MiB, 16, 1, 6400, 512 << 10, 192 * MiB},
		{200 * MiB, 16, 2, 3200, 512 << 10, 192 * MiB},
		{200 * MiB, 4, 1, 25600, 2 * MiB, 192 * MiB},
		{1 << 30, 1, 1, 524288, 4 * MiB, 1020 * MiB},
		{96 * MiB, 16, 1, 3072, 256 << 10, 92 * MiB},
		{32 * MiB, 16, 1, 1024, 256 << 10, 28 * MiB},
		{8 * MiB, 16, 1, 512, 256 << 10, 4 * MiB}, // the rings' floor: Go keeps half
	} {
		b := budgets(c.limit, c.procs, c.exporters)
		if b.queue != c.queue || b.ring != c.ring || b.goLimit != c.goLimit {
			t.Errorf("budgets(%d MiB, %d, %d) = queue %d ring %d go %d MiB, want %d %d %d MiB",
				c.limit/MiB, c.procs, c.exporters, b.queue, b.ring, b.goLimit/MiB, c.queue, c.ring, c.goLimit/MiB)
		}
		size := c.limit
		if size == 0 {
			size = unlimited
		}
		if rings := int64(c.procs) * int64(b.ring); b.ring > minRing && rings > size/16 {
			t.Errorf("budgets(%d MiB, %d, %d): rings %d MiB over a sixteenth", c.limit/MiB, c.procs, c.exporters, rings/MiB)
		}
		if queued := int64(c.procs*c.exporters*b.queue) * spanBytes; b.queue > minQueue && queued > size/4 {
			t.Errorf("budgets(%d MiB, %d, %d): queues %d MiB over a quarter", c.limit/MiB, c.procs, c.exporters, queued/MiB)
		}
	}
}
