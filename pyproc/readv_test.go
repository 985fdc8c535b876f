package pyproc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ownPages maps n pages in this process, fills them, and unmaps the ones
// listed in holes: memory that procMemory reads through process_vm_readv
// (or /proc/self/mem) with unmapped pages in between.
func ownPages(t *testing.T, n int, holes ...int) []byte {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, n*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		mem[i] = byte(i*7 + i/pageSize)
	}
	munmap := func(b []byte) {
		if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0); e != 0 {
			t.Fatal(e)
		}
	}
	for _, h := range holes {
		munmap(mem[h*pageSize : (h+1)*pageSize])
	}
	t.Cleanup(func() { munmap(mem) })
	return mem
}

// TestProcReadV reads this process's own pages, one of them unmapped, in
// 3,000 segments: more than one call's 1,024 iovecs, with segments in,
// across and around the hole. Each segment must come back whole with the
// right bytes or with an error of its own, whether process_vm_readv or
// /proc/PID/mem does the reading.
func TestProcReadV(t *testing.T) {
	mem := ownPages(t, 8, 3)
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	hole := func(addr uint64, n int) bool {
		return addr < base+4*pageSize && addr+uint64(n) > base+3*pageSize
	}
	rng := rand.New(rand.NewPCG(31, 32))
	rs := make([]Read, 3000)
	for i := range rs {
		n := 1 + rng.IntN(300)
		rs[i] = Read{Addr: base + uint64(rng.IntN(8*pageSize-n)), Buf: make([]byte, n)}
	}
	rs[10] = Read{Addr: base + 3*pageSize - 16, Buf: make([]byte, 64)} // runs into the hole
	rs[11] = Read{Addr: base + 4*pageSize - 8, Buf: make([]byte, 64)}  // starts in it
	rs[12] = Read{Addr: base, Buf: nil}                                // nothing to read
	for _, viaFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("proc mem %v", viaFile), func(t *testing.T) {
			calls := 0
			m := &procMemory{pid: os.Getpid(), noVMRdv: viaFile, reads: &calls}
			defer m.Close()
			for i := range rs {
				clear(rs[i].Buf)
				rs[i].Err = errUnmapped // ReadV sets every segment's outcome
			}
			err := m.ReadV(rs)
			if err == nil {
				t.Error("ReadV: no error, but segments cross the hole")
			}
			bad := 0
			for i, r := range rs {
				switch {
				case hole(r.Addr, len(r.Buf)) && len(r.Buf) > 0:
					bad++
					if r.Err == nil {
						t.Errorf("segment %d (%#x+%d) crosses the hole but read", i, r.Addr-base, len(r.Buf))
					}
				case r.Err != nil:
					t.Errorf("segment %d (%#x+%d): %v", i, r.Addr-base, len(r.Buf), r.Err)
				case !bytes.Equal(r.Buf, mem[r.Addr-base:r.Addr-base+uint64(len(r.Buf))]):
					t.Errorf("segment %d (%#x+%d): wrong bytes", i, r.Addr-base, len(r.Buf))
				}
			}
			// process_vm_readv: a call per 1,024 iovecs, and one more to go
			// on after each unreadable segment.
			if !viaFile && calls > 3+bad {
				t.Errorf("%d calls for %d segments, %d of them unreadable", calls, len(rs), bad)
			}
			t.Logf("%d segments, %d unreadable, %d system calls", len(rs), bad, calls)
		})
	}
}

// TestRunSpans reads segments through Process.run: near ones as one span, and
// a span that fails (one segment unreadable) read again segment by segment.
func TestRunSpans(t *testing.T) {
	f := &fakeMemory{base: fakeBase, data: make([]byte, 1<<16)}
	for i := range f.data {
		f.data[i] = byte(i * 13)
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for iter := 0; iter < 300; iter++ {
		cm := &countingMemory{r: f}
		s := newSegs(0)
		var want [][]byte
		for i := 0; i < 1+rng.IntN(200); i++ {
			off := rng.IntN(len(f.data) + 0x400) // some run past the end
			n := rng.IntN(0x300)
			if rng.IntN(20) == 0 {
				n = -1 // refused before any read
			}
			s.add(fakeBase+uint64(off), n)
			if n >= 0 && off+n <= len(f.data) {
				want = append(want, f.data[off:off+n])
			} else {
				want = append(want, nil)
			}
		}
		(&Process{m: mem{cm}}).run(s)
		if cm.n > 2 {
			t.Fatalf("iteration %d: %d reads, want 1 (2 when a span failed)", iter, cm.n)
		}
		for i, w := range want {
			b, err := s.block(i)
			switch {
			case w == nil && err == nil:
				t.Fatalf("iteration %d: segment %d (%#x+%d) past the memory read", iter, i, s.s[i].addr, s.s[i].n)
			case w != nil && (err != nil || !bytes.Equal(b.b, w) || b.addr != s.s[i].addr):
				t.Fatalf("iteration %d: segment %d: %v, %d bytes", iter, i, err, len(b.b))
			}
		}
	}
}

// TestSpans: segments are grouped by address into spans that cover them,
// with gaps under spanGap and spans no longer than spanMax.
func TestSpans(t *testing.T) {
	for _, tc := range []struct {
		addr []uint64
		size []int
		want int // spans
	}{
		{[]uint64{0x1000}, []int{8}, 1},
		{[]uint64{0x1000, 0x1008}, []int{8, 8}, 1},
		{[]uint64{0x1008, 0x1000}, []int{8, 8}, 1},               // out of order
		{[]uint64{0x1000, 0x1000 + 8 + spanGap}, []int{8, 8}, 1}, // the widest gap
		{[]uint64{0x1000, 0x1000 + 9 + spanGap}, []int{8, 8}, 2},
		{[]uint64{0x1000, 0x1000}, []int{8, 64}, 1}, // one inside another
		{chain(spanMax / 512), sizes(spanMax/512, 512), 1},
		{chain(spanMax/512 + 1), sizes(spanMax/512+1, 512), 2},
	} {
		order, sp := spans(tc.addr, tc.size, &arena{})
		if len(sp) != tc.want {
			t.Errorf("%#x %v: %d spans, want %d", tc.addr, tc.size, len(sp), tc.want)
		}
		for _, x := range sp {
			for k := x.lo; k < x.hi; k++ {
				i := order[k].i()
				if tc.addr[i] < x.addr || tc.addr[i]+uint64(tc.size[i]) > x.end {
					t.Errorf("%#x %v: segment %d outside its span %#x-%#x", tc.addr, tc.size, i, x.addr, x.end)
				}
			}
		}
	}
}

// chain is n addresses 512 bytes apart; sizes is n times size.
func chain(n int) (out []uint64) {
	for i := 0; i < n; i++ {
		out = append(out, 0x1000+512*uint64(i))
	}
	return out
}

func sizes(n, size int) (out []int) {
	for i := 0; i < n; i++ {
		out = append(out, size)
	}
	return out
}
