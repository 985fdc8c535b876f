package pyproc

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var garbagePaths = []string{
	"reqs[*].rid", "reqs[*].spec_num_correct_drafts", "x.y[2].z", "[*][*][*]", "a", "[0]", "[-1].b",
	`d["k"].v`, "num_correct_drafts_per_req_cpu[*]", "",
}

// TestGarbageEval runs FindFrame, Local and Eval over random memory laid out
// like objects (see garbageProcess), with the Eval type addresses sprinkled
// in as ob_type words so the int, str, list, descriptor and cell paths run
// too: every call must return, never panic or loop.
func TestGarbageEval(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	for i := 0; i < iterations; i++ {
		l := garbageLayouts()[i%4]
		p, f := garbageProcess(rng, l)
		extra := func(i uint64) uint64 { return fakeBase + 0x100*(11+i) }
		p.types.list, p.types.long, p.types.boolean, p.types.float = extra(1), extra(2), extra(3), extra(4)
		p.types.none, p.types.member, p.types.getset, p.types.cell, p.types.bytes = extra(5), extra(6), extra(7), extra(8), extra(9)
		all := []uint64{p.types.str, p.types.dict, p.types.tuple, p.types.typ, p.types.code, p.types.property,
			extra(1), extra(2), extra(3), extra(4), extra(6), extra(7), extra(8), extra(9)}
		for k := 0; k < 800; k++ {
			f.put64(fakeBase+uint64(rng.IntN(len(f.data)-8))&^7, all[rng.IntN(len(all))])
		}
		addr := func() uint64 { return fakeBase + uint64(rng.IntN(len(f.data)))&^7 }
		done := make(chan struct{})
		go func() {
			defer close(done)
			for j := 0; j < 30; j++ {
				p.Eval(addr(), garbagePaths[rng.IntN(len(garbagePaths))])
				fr := &Frame{Addr: addr(), Code: addr()}
				p.Local(fr, "batch")
				p.LocalNames(fr)
				p.FindFrame(rng.IntN(1<<16), addr())
				p.findFrame(0, addr(), true)
			}
		}()
		waitReaders(t, done, fmt.Sprintf("iteration %d (CPython %s layout)", i, l.Version))
	}
}

// TestGarbageFrames points a thread state at a chain of random frames whose
// code words sometimes equal the code we look for, so Local runs on garbage.
func TestGarbageFrames(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 500; i++ {
		l := garbageLayouts()[i%4]
		p, f := garbageProcess(rng, l)
		p.types.cell, p.types.bytes = fakeBase+0x100*19, fakeBase+0x100*20
		code := fakeBase + uint64(rng.IntN(len(f.data)))&^7
		f.put64(code+8, p.types.code)
		for k := 0; k < 200; k++ {
			fr := fakeBase + uint64(rng.IntN(len(f.data)-0x200))&^7
			f.put64(fr+l.FrameCode, code)
		}
		p.tstates = map[int]Thread{42: {Addr: fakeBase + 0x1000}}
		fr, err := p.findFrame(42, code, false)
		if err == nil {
			p.Local(fr, "batch")
			p.LocalNames(fr)
		}
		p.Local(&Frame{Addr: fakeBase + uint64(rng.IntN(len(f.data)))&^7, Code: code}, "self")
	}
}

func TestParsePath(t *testing.T) {
	for _, ok := range []string{"reqs[*].rid", "x.y[2].z", "[-1]", `m["a.b"]`, "m['k'][0]", "", "a_1.b2"} {
		if _, err := parsePath(ok); err != nil {
			t.Errorf("parsePath(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"reqs[", "a[]", "a[1", ".a", "a..b", "a.", "a[x]", "a b", "a[*"} {
		if _, err := parsePath(bad); err == nil {
			t.Errorf("parsePath(%q) accepted", bad)
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	alphabet := []byte("ab.[]*-0\"'_ \x80")
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.IntN(12))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		parsePath(string(b))
	}
}

type recordingMemory struct {
	r    Memory
	segs []segment
}

func (m *recordingMemory) ReadAt(b []byte, addr uint64) error {
	if err := m.r.ReadAt(b, addr); err != nil {
		return err
	}
	m.segs = append(m.segs, segment{addr, append([]byte(nil), b...)})
	return nil
}

// replayMemory serves only what was recorded: any other read fails, like
// unmapped memory. Recorded segments that overlap or touch are one range
// (later ones over earlier), so a read is served whatever reads made the
// recording.
type replayMemory struct{ segs []segment }

func newReplay(recorded []segment) *replayMemory {
	in := slices.Clone(recorded)
	slices.SortStableFunc(in, func(a, b segment) int { return cmp.Compare(a.addr, b.addr) })
	var out []segment
	for _, s := range in {
		n := len(out)
		if n == 0 || s.addr > out[n-1].addr+uint64(len(out[n-1].b)) {
			out = append(out, segment{s.addr, slices.Clone(s.b)})
			continue
		}
		last := &out[n-1]
		if end := s.addr + uint64(len(s.b)); end > last.addr+uint64(len(last.b)) {
			last.b = append(last.b, make([]byte, end-last.addr-uint64(len(last.b)))...)
		}
		copy(last.b[s.addr-last.addr:], s.b)
	}
	// Recorded order wins where segments overlap: the damage was made on them.
	for _, s := range recorded {
		i, _ := slices.BinarySearchFunc(out, s.addr+1, func(o segment, a uint64) int { return cmp.Compare(o.addr, a) })
		copy(out[i-1].b[s.addr-out[i-1].addr:], s.b)
	}
	return &replayMemory{out}
}

func (m *replayMemory) ReadAt(b []byte, addr uint64) error {
	i, _ := slices.BinarySearchFunc(m.segs, addr+1, func(o segment, a uint64) int { return cmp.Compare(o.addr, a) })
	if i > 0 {
		if s := m.segs[i-1]; addr-s.addr+uint64(len(b)) <= uint64(len(s.b)) {
			copy(b, s.b[addr-s.addr:])
			return nil
		}
	}
	return errUnmapped
}

var errUnmapped = errorString("unmapped")

type errorString string

func (e errorString) Error() string { return string(e) }

// checkDamagedReplay records the reads of a real FindFrame+Local+Eval run,
// then replays them many times with bytes flipped and words replaced by
// other recorded addresses: the readers go as deep as a real object graph
// lets them before they meet the damage, and must still return.
func checkDamagedReplay(t *testing.T, p *Process, tg *evalTarget) {
	rec := &recordingMemory{r: p.m.r}
	q := *p
	q.m, q.tstates = mem{rec}, nil
	paths := []string{"reqs[*].rid", "reqs[*].spec_num_correct_drafts", "nums", "texts", "slot_req.rid",
		"frozen.b", "wide.a39", `extra["spec"]`, "nested.y[*].z", "reqs[1].rid", "module_ref.CONSTANT",
		"reqs[*].output_ids[-1]", "extra[*]", "reqs[*].kind", "seq_lens"}
	// Every run reads each path in batches and item by item, which must
	// agree on the same (damaged) memory.
	run := func(q *Process) {
		for _, code := range []uint64{tg.StageCode, tg.WaitCode} {
			f, err := q.FindFrame(tg.TID, code)
			if err != nil {
				continue
			}
			q.LocalNames(f)
			b, err := q.Local(f, "batch")
			if err != nil {
				continue
			}
			for _, path := range paths {
				sameEval(t, q, b, path, "damaged replay")
			}
		}
	}
	run(&q)
	if len(rec.segs) < 50 {
		t.Fatalf("recorded only %d reads", len(rec.segs))
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 150; i++ {
		segs := make([]segment, len(rec.segs))
		for j, s := range rec.segs {
			segs[j] = segment{s.addr, append([]byte(nil), s.b...)}
		}
		for k := 0; k < 1+rng.IntN(40); k++ {
			s := segs[rng.IntN(len(segs))]
			switch off := rng.IntN(len(s.b)); rng.IntN(3) {
			case 0:
				s.b[off] ^= byte(1 << rng.IntN(8))
			case 1:
				s.b[off] = byte(rng.Uint32())
			default:
				if off&^7+8 <= len(s.b) {
					o := segs[rng.IntN(len(segs))]
					binary.LittleEndian.PutUint64(s.b[off&^7:], o.addr+uint64(rng.IntN(len(o.b)))&^7)
				}
			}
		}
		r := *p
		r.m, r.tstates = mem{newReplay(segs)}, nil
		done := make(chan struct{})
		go func() { defer close(done); run(&r) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("damaged replay %d: readers did not return", i)
		}
	}
}
