package tracer

import (
	"errors"
	"testing"
	"time"

	"github.com/specprobe/specprobe/probes"
)

// TestWaitFor: detection by module is tried until it finds a spec or
// fails, and gives up when the wait runs out.
func TestWaitFor(t *testing.T) {
	found := &probes.Spec{Engine: "sglang-uno"}
	boom := errors.New("another rank")
	for _, c := range []struct {
		name    string
		results []any // one per try: *probes.Spec, error, or nil for nothing yet
		wait    time.Duration
		want    *probes.Spec
		wantErr error
		tries   int
	}{
		{"found at once", []any{found}, time.Second, found, nil, 1},
		{"found on the third try", []any{nil, nil, found}, time.Second, found, nil, 3},
		{"an error ends the wait", []any{nil, boom, found}, time.Second, nil, boom, 2},
		{"never found", []any{nil}, 20 * time.Millisecond, nil, nil, -1},
		{"no wait: one try", []any{nil, found}, 0, nil, nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			tries := 0
			try := func() (*probes.Spec, error) {
				r := c.results[min(tries, len(c.results)-1)]
				tries++
				switch v := r.(type) {
				case *probes.Spec:
					return v, nil
				case error:
					return nil, v
				}
				return nil, nil
			}
			got, err := waitFor(try, c.wait, time.Millisecond)
			if got != c.want || !errors.Is(err, c.wantErr) {
				t.Errorf("waitFor = %v, %v; want %v, %v", got, err, c.want, c.wantErr)
			}
			if c.tries >= 0 && tries != c.tries {
				t.Errorf("%d tries, want %d", tries, c.tries)
			}
			if c.tries < 0 && tries < 2 {
				t.Errorf("%d tries before giving up, want several", tries)
			}
		})
	}
}
