package pyproc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeMemory is a window of bytes at base; reads outside it fail, like
// unmapped memory.
type fakeMemory struct {
	base uint64
	data []byte
}

func (f *fakeMemory) ReadAt(p []byte, addr uint64) error {
	if addr < f.base || addr-f.base > uint64(len(f.data)) || uint64(len(p)) > uint64(len(f.data))-(addr-f.base) {
		return fmt.Errorf("unmapped %#x", addr)
	}
	copy(p, f.data[addr-f.base:])
	return nil
}

func (f *fakeMemory) put64(addr, v uint64) {
	binary.LittleEndian.PutUint64(f.data[addr-f.base:], v)
}

const fakeBase = 0x7f00_0000_0000

// garbageProcess is a Process over memory that looks just enough like
// objects (pointers into itself, the type addresses, small and negative
// numbers) for the readers to go deep before they hit nonsense.
func garbageProcess(rng *rand.Rand, l Layout) (*Process, *fakeMemory) {
	f := &fakeMemory{base: fakeBase, data: make([]byte, 1<<16)}
	p := &Process{m: mem{f}, layout: l, runtime: fakeBase + 0x800, hashOK: 1}
	t := func(i uint64) uint64 { return fakeBase + 0x100*i }
	p.types = typeAddrs{str: t(1), dict: t(2), module: t(3), function: t(4), typ: t(5),
		static: t(6), class: t(7), property: t(8), method: t(9), code: t(10), tuple: t(11)}
	types := []uint64{t(1), t(2), t(3), t(4), t(5), t(6), t(7), t(8), t(9), t(10), t(11)}
	for off := uint64(0); off < uint64(len(f.data)); off += 8 {
		var v uint64
		switch r := rng.IntN(10); {
		case r < 4:
			v = fakeBase + uint64(rng.IntN(len(f.data)))&^7
		case r < 5:
			v = types[rng.IntN(len(types))]
		case r < 6:
			v = uint64(rng.IntN(64))
		case r < 7:
			v = ^uint64(0)
		default:
			v = rng.Uint64()
		}
		f.put64(fakeBase+off, v)
	}
	return p, f
}

func garbageLayouts() []Layout {
	var out []Layout
	for _, minor := range []int{10, 11, 12} {
		l, _ := tableLayout(Version{3, minor, 0})
		out = append(out, l)
	}
	l, _ := tableLayout(Version{3, 12, 0})
	l.Version, l.DictValuesArray, l.InterpretersHead, l.InterpNext = Version{3, 13, 0}, 8, 0x278, 0x1c60
	return append(out, l)
}

// TestGarbageMemory feeds random memory to every reader: they must return
// (an error or a result), never panic or loop.
func TestGarbageMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	for i := 0; i < iterations; i++ {
		l := garbageLayouts()[i%4]
		p, f := garbageProcess(rng, l)
		addr := func() uint64 { return fakeBase + uint64(rng.IntN(len(f.data)))&^7 }
		done := make(chan struct{})
		go func() {
			defer close(done)
			for j := 0; j < 20; j++ {
				p.dictGet(addr(), "verify")
				p.dictKeys(addr(), 1000)
				p.readStr(addr())
				p.strEquals(addr(), "verify", p.strHash("verify"))
				p.getattr(addr(), "verify", "x")
				p.unwrap(addr(), "x")
				p.readCode(addr(), "x")
				p.mro(addr())
				p.typeName(addr())
			}
			p.FindCode("sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2.verify")
			if threads, err := p.Threads(); err == nil {
				for _, th := range threads {
					p.Stack(th)
				}
			}
			p.Stack(Thread{Addr: addr()})
		}()
		waitReaders(t, done, fmt.Sprintf("iteration %d (CPython %s layout)", i, l.Version))
	}
}

// TestGarbageDict builds a dict header over a keys table of random bytes,
// so the probe and scan loops themselves see garbage.
func TestGarbageDict(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		l := garbageLayouts()[i%4]
		p, f := garbageProcess(rng, l)
		d, keys := uint64(fakeBase+0x4000), uint64(fakeBase+0x5000)
		f.put64(d+8, p.types.dict)
		f.put64(d+l.DictKeys, keys)
		if rng.IntN(2) == 0 {
			f.put64(d+l.DictValues, 0)
		}
		hdr := f.data[keys-fakeBase:]
		if l.DictKeysLegacy {
			binary.LittleEndian.PutUint64(hdr[8:], 1<<(3+rng.IntN(12)))
		} else {
			log2 := 3 + rng.IntN(12)
			hdr[8], hdr[10] = byte(log2), byte(rng.IntN(3))
			hdr[9] = byte(log2) // one-byte indices below 256 slots, two above
			if log2 >= 8 {
				hdr[9]++
			}
		}
		binary.LittleEndian.PutUint64(hdr[0x18:], uint64(rng.IntN(64)))
		binary.LittleEndian.PutUint64(hdr[0x20:], uint64(rng.IntN(64)))
		p.dictGet(d, "verify")
		p.dictKeys(d, 1000)
		p.hashOK = -1
		p.dictGet(d, "draft")
	}
}

func TestSipHash(t *testing.T) {
	// Reference vectors of SipHash-2-4 (Aumasson & Bernstein): key 00..0f,
	// message 00..(n-1).
	k0, k1 := uint64(0x0706050403020100), uint64(0x0f0e0d0c0b0a0908)
	msg := make([]byte, 15)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, tc := range []struct {
		n    int
		want uint64
	}{{0, 0x726fdb47dd0e0e31}, {15, 0xa129ca6149be45e5}} {
		if got := sipHash(k0, k1, 2, msg[:tc.n]); got != tc.want {
			t.Errorf("siphash24(%d bytes) = %#x, want %#x", tc.n, got, tc.want)
		}
	}
}

// runtimeWith builds memory holding Py_Version and a _PyRuntime that starts
// with _Py_DebugOffsets as 3.13/3.14 write them.
func runtimeWith(hex uint64, freeThreaded uint64, fields []string, vals map[string]uint64) (*fakeMemory, *interpBinary) {
	f := &fakeMemory{base: fakeBase, data: make([]byte, 1<<14)}
	f.put64(fakeBase+0x10, hex)
	rt := uint64(fakeBase + 0x1000)
	copy(f.data[rt-fakeBase:], debugCookie)
	for i, name := range fields {
		switch name {
		case "cookie":
		case "version":
			f.put64(rt+8*uint64(i), hex)
		case "free_threaded":
			f.put64(rt+8*uint64(i), freeThreaded)
		default:
			f.put64(rt+8*uint64(i), vals[name])
		}
	}
	syms := map[string]uint64{"_PyRuntime": rt, "Py_Version": fakeBase + 0x10}
	for _, n := range wantSyms[3:] {
		syms[n] = fakeBase + 0x2000
	}
	syms["_Py_HashSecret"] = fakeBase + 0x20
	return f, &interpBinary{path: "/usr/lib/libpython3.14.so.1.0", syms: syms}
}

// plausible offsets, as 3.13/3.14 GIL builds report them.
var plausible = map[string]uint64{
	"runtime.size": 0x45000, "runtime.interpreters_head": 0x278,
	"interp.size": 0x80000, "interp.next": 0x1c60, "interp.threads_head": 0x1cb0, "interp.threads_main": 0x1cb8,
	"interp.imports_modules": 0x1de8, "tstate.size": 0x300, "tstate.next": 8, "tstate.thread_id": 0x98,
	"tstate.native_thread_id": 0xa0, "tstate.current_frame": 0x48, "frame.size": 0x50, "frame.previous": 8,
	"code.size": 0xd0, "code.filename": 0x70, "code.name": 0x78, "code.qualname": 0x80, "code.firstlineno": 0x44,
	"object.ob_type": 8, "type.tp_name": 0x18, "type.tp_flags": 0xa8, "tuple.ob_item": 0x18, "tuple.ob_size": 0x10,
	"dict.ma_keys": 0x20, "dict.ma_values": 0x28, "unicode.state": 0x20, "unicode.length": 0x10,
	"unicode.asciiobject_size": 0x28,
}

func TestDebugOffsets314(t *testing.T) {
	f, b := runtimeWith(0x030e00f0, 0, debugFields314, plausible)
	p, err := attach(f, b)
	if err != nil {
		t.Fatal(err)
	}
	l := p.Layout()
	if p.Version().String() != "3.14.0" || l.InterpThreadsHead != 0x1cb0 || l.InterpModules != 0x1de8 ||
		l.TstateNativeThreadID != 0xa0 || l.CodeFirstLine != 0x44 || l.ASCIIData != 0x28 || l.FrameCodeTagBits == 0 {
		t.Errorf("3.14 layout read wrong: %+v", l)
	}
	// The 3.13 struct read as if it were 3.14 must be refused, not trusted.
	f, b = runtimeWith(0x030e00f0, 0, debugFields313, plausible)
	if _, err := attach(f, b); err == nil || !strings.Contains(err.Error(), "layout") {
		t.Errorf("misplaced fields accepted: %v", err)
	}
}

func TestRefusesFreeThreaded(t *testing.T) {
	f, b := runtimeWith(0x030d00f0, 1, debugFields313, plausible)
	if _, err := attach(f, b); err == nil || !strings.Contains(err.Error(), "free-threaded") {
		t.Errorf("debug offsets say free-threaded: %v", err)
	}
	f, b = runtimeWith(0x030d00f0, 0, debugFields313, plausible)
	b.path = "/usr/lib/libpython3.13t.so.1.0"
	if _, err := attach(f, b); err == nil || !strings.Contains(err.Error(), "free-threaded") {
		t.Errorf("libpython3.13t: %v", err)
	}
	f, b = runtimeWith(0x030d00f0, 0, debugFields313, plausible)
	if _, err := attach(f, b); err != nil {
		t.Errorf("GIL build refused: %v", err)
	}
}

// waitReaders fails the test if the readers under garbage did not return:
// a loop over corrupt memory must always be bounded.
func waitReaders(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: readers did not return", what)
	}
}

// A finalizing interpreter drops sys.modules before it frees the code
// objects a session watches: FindCode says so with ErrFinalizing, which the
// tracer takes for the target's exit, not for a bad read.
func TestFindCodeFinalizing(t *testing.T) {
	for _, l := range garbageLayouts() {
		f := &fakeMemory{base: fakeBase, data: make([]byte, 1<<16)}
		p := &Process{m: mem{f}, layout: l, runtime: fakeBase + 0x800}
		interp := uint64(fakeBase + 0x4000)
		f.put64(p.runtime+l.InterpretersHead, interp) // one interpreter, InterpNext 0
		_, err := p.FindCode("engine.worker", "Worker.verify")
		if !errors.Is(err, ErrFinalizing) || !Exiting(err) {
			t.Errorf("%s: FindCode with sys.modules NULL: %v, want ErrFinalizing", l.Version, err)
		}
		f.put64(interp+l.InterpModules, 0x10) // not NULL but no object: a bad read, not the exit
		if _, err := p.FindCode("engine.worker", "Worker.verify"); err == nil || Exiting(err) {
			t.Errorf("%s: FindCode with sys.modules 0x10: %v, want a read error", l.Version, err)
		}
	}
}

// A process that has exited: the reads fail with ESRCH, which is its exit,
// not a bad read.
func TestFindCodeExited(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	p := &Process{m: mem{&procMemory{pid: cmd.Process.Pid}}, layout: garbageLayouts()[0], runtime: fakeBase + 0x800}
	_, err := p.FindCode("engine.worker", "Worker.verify")
	if !Exiting(err) {
		t.Errorf("FindCode in an exited process: %v, want Exiting", err)
	}
	if Exiting(fmt.Errorf("read: %w", unix.EFAULT)) {
		t.Error("EFAULT taken for an exit")
	}
}
