package elfsym

import (
	"bytes"
	"debug/elf"
	"testing"
)

// FuzzNewFile: any bytes either fail the checks or yield symbols, without
// a panic and within the read budget.
func FuzzNewFile(f *testing.F) {
	f.Add(sample(f))
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &counting{r: bytes.NewReader(data)}
		ef, err := NewFile(r, int64(len(data)), "fuzz")
		if err != nil {
			return
		}
		_ = ef.Symbols(func(elf.Symbol, bool) bool { return true })
		if r.n > MaxRead {
			t.Fatalf("read %d bytes", r.n)
		}
	})
}

type counting struct {
	r *bytes.Reader
	n int64
}

func (c *counting) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}
