package loader

import (
	"strings"

	"github.com/specprobe/specprobe/bpf"
)

// Telling a Python call's entry and exit from other writes to its code
// object's reference count. Pure: a decoded hit in, a verdict out; the
// interpreter's symbols come through Namer.

// Namer names the function an instruction pointer is in (Symbolizer).
type Namer interface {
	Name(ip uint64) string
	Has(fn string) bool
}

// Hit is a watchpoint hit classified.
type Hit uint8

const (
	HitIgnored Hit = iota // no call begins or ends here
	HitEntry
	HitExit
	HitCancel // withdraws the thread's latest tentative entry of the site: it was no call
	HitFreed  // the code object was freed: its site is to be disarmed
	HitStale  // from a code object no longer watched (freed, or replaced)
)

// watchDecoder keeps, per site and thread, what the hits so far said.
type watchDecoder struct {
	namer Namer
	// Last reference count seen per watched site: a hit raising it is a
	// frame push (entry), one lowering it a pop (exit).
	refcnt map[uint32]uint64
	addr   map[uint32]uint64 // the object each site's watch is on
	// Calls of each site open on each thread, as decoded so far, and
	// entries from the eval loop not yet closed by a frame pop.
	open, tentative map[watchKey]int
	ipClasses       map[uint64]ipClass
	// Python 3.12+: frame_dealloc releases a frame object's own reference.
	frameObjectOwnsCode bool
	// Python 3.11 pops a frame while it is still the current one.
	popsCurrentFrame bool
	// On 3.11 with kept_return armed (keptarm.go), which reports the
	// returns of calls whose frame outlives them: only such a frame's
	// object drops a code reference in frame_dealloc, so that drop is no
	// call's end. (On 3.10 frame_dealloc is every call's pop.)
	keptDealloc bool
	popsNamed   uint8  // namesPops: 0 not asked yet, 1 no, 2 yes
	Ignored     uint64 // hits that were no call
	// Tentative says the entry classify last returned is tentative: a call
	// only once a pop closes it (spanbuilder.Event.Tentative).
	Tentative bool
}

type watchKey struct {
	site, tid uint32
}

func newWatchDecoder(n Namer) *watchDecoder {
	return &watchDecoder{namer: n, refcnt: map[uint32]uint64{}, addr: map[uint32]uint64{},
		open: map[watchKey]int{}, tentative: map[watchKey]int{}, ipClasses: map[uint64]ipClass{}}
}

// watch starts following site on the code object at addr, whose count was
// refcnt when armed.
func (d *watchDecoder) watch(site uint32, addr, refcnt uint64) {
	d.refcnt[site], d.addr[site] = refcnt, addr
	for k := range d.tentative {
		if k.site == site {
			delete(d.tentative, k)
		}
	}
}

// forget stops following site.
func (d *watchDecoder) forget(site uint32) { delete(d.refcnt, site) }

// classify turns a hit into an entry or an exit by the change of the
// reference count since the last hit on that code object, and by where the
// write came from.
func (d *watchDecoder) classify(w *bpf.StageWatchEvent) Hit {
	site := w.Site
	last, known := d.refcnt[site]
	if !known || w.Addr != d.addr[site] {
		return HitStale // disarmed (the code object was freed), or queued from one since replaced
	}
	k := watchKey{site, w.Tid}
	d.Tentative = false
	exit, c := true, ipPop
	if w.Flags&wKept == 0 {
		val := w.Refcnt
		d.refcnt[site] = val
		if val == 0 {
			// Freed: its memory will be reused, and writes there mean nothing.
			return HitFreed
		}
		if val == last {
			return HitIgnored
		}
		exit, c = val < last, d.ipClass(w.Ip)
		if exit && c == ipUnknown && d.namesPops() {
			// Where the frame pops have names, code without one pops no
			// frame. Debian trixie's 3.13 exports its pop function (and
			// pushes in unnamed code too): f.f_code taken and dropped by
			// unnamed code on a watchdog thread was taken for calls.
			c = ipOther
		}
	}
	// else the return of a call whose frame outlives it (kept_return):
	// a pop that wrote nothing.
	if d.otherReference(w, k, c, exit) {
		if exit && d.open[k] == 0 && d.tentative[k] > 0 {
			// An entry taken for a push (on a stripped interpreter every
			// +1 is tentative) was proven no call since: the frames
			// brought the open count below it. This drops a reference
			// while no call runs: the one that entry took, withdrawn.
			d.tentative[k]--
			return HitCancel
		}
		d.Ignored++
		return HitIgnored
	}
	cancel := false
	switch {
	case c == ipPush && !exit && d.inEvalLoop(w.Ip), c == ipUnknown && !exit:
		// The eval loop both pushes frames inline (3.11+) and takes
		// references to the code object for other reasons (f.__code__
		// held in a variable): a tentative entry until a pop closes it.
		// So is a +1 from code without a symbol (a stripped interpreter:
		// func_get_code has none on Debian's 3.11, but the eval loop that
		// drops the reference again is exported and withdraws it).
		d.tentative[k]++
		d.Tentative = true
	case exit && (c == ipOther || c == ipPush):
		// A reference dropped outside a frame pop: it ends a reference
		// the eval loop took, not a call; that entry is withdrawn.
		if d.tentative[k] == 0 {
			d.Ignored++
			return HitIgnored
		}
		d.tentative[k]--
		cancel = true
	case c == ipOther, c == ipIgnore:
		d.Ignored++
		return HitIgnored
	case c == ipPush && exit, c == ipPop && !exit:
		d.Ignored++
		return HitIgnored
	case exit:
		if d.tentative[k] > 0 {
			d.tentative[k]-- // the entry it closes was a push
		}
	}
	switch {
	case !exit:
		d.open[k]++
	case d.open[k] > 0:
		d.open[k]--
		if w.Flags&wFrames != 0 {
			// The frames say what still runs: a pop lost before this one
			// (a full ring) leaves no call counted open that is not.
			d.open[k] = min(d.open[k], d.framesRunning(w, true))
		}
	}
	switch {
	case cancel:
		return HitCancel
	case exit:
		return HitExit
	}
	return HitEntry
}

// Bits of watch_event.flags (bpf/stage.c's enum watch_flag, generated).
const (
	wRefcntFailed = uint8(bpf.StageWatchFlagW_REFCNT_FAILED)
	wExcKnown     = uint8(bpf.StageWatchFlagW_EXC_KNOWN)
	wFrames       = uint8(bpf.StageWatchFlagW_FRAMES)
	wPayload      = uint8(bpf.StageWatchFlagW_PAYLOAD)
	wDropped      = uint8(bpf.StageWatchFlagW_DROPPED) // events of the thread were lost just before this hit
	wCUDA         = uint8(bpf.StageWatchFlagW_CUDA)    // the thread's CUDA counters are in the record
	wKept         = uint8(bpf.StageWatchFlagW_KEPT)    // a return whose frame outlives it (kept_return)
)

// otherReference tells, from the frames of the function watch_hit counted
// on the thread's stack, a write that is no push or pop of k's calls.
func (d *watchDecoder) otherReference(w *bpf.StageWatchEvent, k watchKey, c ipClass, exit bool) bool {
	if w.Flags&wFrames == 0 {
		return false // not counted
	}
	frames := d.framesRunning(w, exit)
	switch {
	case exit:
		// No call open here (a reference dropped at shutdown), or the
		// function still has a frame on this thread for every call open
		// there: the reference dropped was held elsewhere (a frame of
		// logging's findCaller holding f.f_code being cleared).
		return frames >= d.open[k]
	case c == ipUnknown:
		// Without a symbol, a reference taken while the function runs here
		// (f.f_code, sys._getframe()) cannot be told from a recursive
		// call: taken as a reference.
		return frames > 0
	}
	return false
}

// framesRunning is how many frames of the hit's code run on its thread
// (W_FRAMES must be set): at a pop, those left once it is done.
func (d *watchDecoder) framesRunning(w *bpf.StageWatchEvent, exit bool) int {
	n := int(w.Frames)
	// One returning on 3.11 is cleared while still the current frame: it
	// runs no more.
	frames := n / 2
	if exit && n%2 == 1 && d.popsCurrentFrame && !d.inEvalLoop(w.Ip) {
		frames--
	}
	return frames
}

// popDepth is, at a pop, how many calls of the site its thread runs
// counting the one ending (spanbuilder.Event.Depth); 0 when not counted.
func (d *watchDecoder) popDepth(w *bpf.StageWatchEvent) int {
	if w.Flags&wFrames == 0 {
		return 0
	}
	return d.framesRunning(w, true) + 1
}

// namesPops is pyframes.go's namesPops of the decoder's namer, asked once.
func (d *watchDecoder) namesPops() bool {
	if d.popsNamed == 0 {
		d.popsNamed = 1
		if d.namer != nil && namesPops(d.namer) {
			d.popsNamed = 2
		}
	}
	return d.popsNamed == 2
}

// inEvalLoop tells whether ip is in the interpreter's eval loop.
func (d *watchDecoder) inEvalLoop(ip uint64) bool {
	if d.namer == nil {
		return false
	}
	fn, _, _ := strings.Cut(d.namer.Name(ip), "+")
	return fn == "_PyEval_EvalFrameDefault"
}

// ipClass sorts an instruction pointer once, by the function it is in.
func (d *watchDecoder) ipClass(ip uint64) ipClass {
	c, ok := d.ipClasses[ip]
	if !ok {
		c = ipUnknown
		if d.namer != nil {
			c = classifyIP(d.namer.Name(ip), d.frameObjectOwnsCode || d.keptDealloc)
		}
		d.ipClasses[ip] = c
	}
	return c
}
