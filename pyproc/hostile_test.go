package pyproc

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/specprobe/specprobe/internal/testinterp"
)

// attachHostile runs testdata/hostile_modules.py, waits until it has built
// its sys.modules and attaches to it.
func attachHostile(t *testing.T, python string, args ...string) *Process {
	t.Helper()
	fx := startFixture(t, python, nil, append([]string{"testdata/hostile_modules.py"}, args...)...)
	line, err := bufio.NewReader(fx.stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("hostile target: %q %v", line, err)
	}
	p, err := Attach(fx.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestForgedHashes: a process with 600,000 sys.modules entries whose first
// key carries a wrong cached hash. One forged hash must not turn lookups
// into scans (it did: 2-9 s a lookup); with every checked key forged the
// lookup is refused at once instead of scanning 600,000 entries.
func TestForgedHashes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 600,000-entry sys.modules")
	}
	python := testinterp.Py312
	t.Run("one forged hash", func(t *testing.T) {
		p := attachHostile(t, python, "600000", "1")
		start := time.Now()
		for _, m := range []string{"fake_mod_599999", "json", "no_such_module"} {
			if _, err := p.HasModule(m); err != nil {
				t.Errorf("HasModule(%s): %v", m, err)
			}
		}
		if took := time.Since(start); took > 200*time.Millisecond || p.hashOK != 1 || p.Stats.Fallbacks != 0 {
			t.Errorf("3 lookups took %s (hashOK %d, %d scans): the forged hash turned lookups into scans", took, p.hashOK, p.Stats.Fallbacks)
		}
		if ok, _ := p.HasModule("fake_mod_599999"); !ok {
			t.Error("fake_mod_599999 not found")
		}
	})
	t.Run("every checked hash forged", func(t *testing.T) {
		p := attachHostile(t, python, "600000", "64")
		start := time.Now()
		_, err := p.HasModule("json")
		if took := time.Since(start); !errors.Is(err, ErrScanTooLarge) || took > 200*time.Millisecond {
			t.Errorf("HasModule with no hash to trust: %v after %s, want ErrScanTooLarge at once", err, took)
		}
	})
}

// TestCyclicInterpreterList: an interpreter list made to loop is reported
// as corrupt at once, not walked without end.
func TestCyclicInterpreterList(t *testing.T) {
	for _, python := range []string{testinterp.Py312, testinterp.Debian311} {
		p := attachHostile(t, python, "10", "0", "cycle")
		start := time.Now()
		if _, err := p.HasModule("json"); !errors.Is(err, ErrCorrupt) || time.Since(start) > 100*time.Millisecond {
			t.Errorf("%s: HasModule with a looping interpreter list: %v after %s, want ErrCorrupt at once", python, err, time.Since(start))
		}
	}
}

// TestBudget: reads through a Budget stop at its count, its bytes and its
// context, with ErrBudget.
func TestBudget(t *testing.T) {
	mem := &fakeMemory{base: fakeBase, data: make([]byte, 4096)}
	b := NewBudget(3, 100)
	r := b.Wrap(mem)
	buf := make([]byte, 40)
	for i, want := range []bool{true, true, false} { // the third would pass 100 bytes
		if err := r.ReadAt(buf, fakeBase); (err == nil) != want {
			t.Errorf("read %d: %v", i, err)
		}
	}
	b.Reset(context.Background())
	for i := range 3 {
		if err := r.ReadAt(buf[:1], fakeBase); err != nil {
			t.Fatalf("read %d after Reset: %v", i, err)
		}
	}
	if err := r.ReadAt(buf[:1], fakeBase); !errors.Is(err, ErrBudget) {
		t.Errorf("fourth read: %v, want ErrBudget", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Reset(ctx)
	cancel()
	if err := r.ReadAt(buf[:1], fakeBase); !errors.Is(err, ErrBudget) {
		t.Errorf("read after the context ended: %v, want ErrBudget", err)
	}
}
