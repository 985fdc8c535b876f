package daemon

import "testing"

// The ring buffers of all the sessions the daemon may run at once and the
// span queues fit in their shares of the limit, and the Go limit leaves
// room for the rings (twice, as VmRSS counts them) and the binary.
func TestBudgets(t *testing.T) {
	const MiB = 1 << 20
	for _, c := range []struct {
		limit            int64
		procs, exporters int
		queue            int64
		ring             uint32
		goLimit          int64
	}{
		{0, 16, 1, 64 * MiB, 1 * MiB, 0}, // sized as for 256 MiB, no Go limit
		{200 * MiB, 16, 1, 50 * MiB, 512 << 10, 160 * MiB},
		{200 * MiB, 16, 2, 25 * MiB, 512 << 10, 160 * MiB},
		{200 * MiB, 4, 1, 50 * MiB, 2 * MiB, 160 * MiB},
		{1 << 30, 1, 1, 256 * MiB, 4 * MiB, 992 * MiB},
		{96 * MiB, 16, 1, 24 * MiB, 256 << 10, 64 * MiB},
		{32 * MiB, 16, 1, 8 * MiB, 256 << 10, 16 * MiB}, // the rings' floor: Go keeps half
	} {
		b := budgets(c.limit, c.procs, c.exporters)
		if b.queue != c.queue || b.ring != c.ring || b.goLimit != c.goLimit {
			t.Errorf("budgets(%d MiB, %d, %d) = queue %d MiB ring %d go %d MiB, want %d MiB %d %d MiB",
				c.limit/MiB, c.procs, c.exporters, b.queue/MiB, b.ring, b.goLimit/MiB, c.queue/MiB, c.ring, c.goLimit/MiB)
		}
		size := c.limit
		if size == 0 {
			size = unlimited
		}
		if rings := int64(c.procs) * int64(b.ring); b.ring > minRing && rings > size/16 {
			t.Errorf("budgets(%d MiB, %d, %d): rings %d MiB over a sixteenth", c.limit/MiB, c.procs, c.exporters, rings/MiB)
		}
		if queued := int64(c.exporters) * b.queue; queued > size/4 {
			t.Errorf("budgets(%d MiB, %d, %d): queues %d MiB over a quarter", c.limit/MiB, c.procs, c.exporters, queued/MiB)
		}
	}
}
