// Package bpfring reads a BPF ring buffer (BPF_MAP_TYPE_RINGBUF) from user
// space, as cilium/ebpf's ringbuf.Reader does, with one difference: a record
// the kernel reserved and never committed does not hold the reader.
package bpfring

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Reader reads one ring buffer map. ringbuf.Reader spins for good on a
// record whose busy bit stays set, and its caller with it (a session: no
// tick, no SIGINT; the daemon's exec watcher: no Close). Such records were
// seen in QEMU guests on Debian's 7.3.4 (written in full, the busy bit never
// cleared, the same thread's later records committed). A BPF program that
// is not sleepable runs for microseconds, so a record busy for StuckAfter
// is lost: ReadInto hands its bytes over with ErrStuck and goes past it.
type Reader struct {
	cons []byte // the consumer page: the reader's position, written here
	prod []byte // the producer page, then the data pages mapped twice
	data []byte
	mask uint64
	epfd int
	ev   []unix.EpollEvent
	// deadline: when a read gives up waiting (os.ErrDeadlineExceeded).
	deadline time.Time
	// A busy record at the consumer's position, and since when it is.
	busyAt    uint64
	busySince time.Time
	stuck     atomic.Uint64 // records stepped over, never committed
}

// StuckAfter is how long a record may stay reserved before it counts as
// lost: far beyond any program's run, even under emulation.
const StuckAfter = time.Second

// ErrStuck: the record ReadInto returns was reserved and never committed;
// its bytes are what the producer had written, and it is counted in Stuck.
var ErrStuck = errors.New("ring buffer record reserved and never committed")

// Record header (kernel/bpf/ringbuf.c): the length with two flags,
// then the page offset; the record's data follows, padded to 8 bytes.
const (
	HeaderBytes    = 8
	ringBusyBit    = 1 << 31
	ringDiscardBit = 1 << 30
)

// NewReader maps m's pages and waits on it with epoll.
// RecordBytes is the room a record of n bytes takes in the ring: its
// header, and the whole padded to 8 bytes.
func RecordBytes(n int) int { return (HeaderBytes + n + 7) &^ 7 }

func NewReader(m *ebpf.Map) (*Reader, error) {
	size := int(m.MaxEntries())
	page := os.Getpagesize()
	r := &Reader{mask: uint64(size - 1), epfd: -1, ev: make([]unix.EpollEvent, 1)}
	var err error
	if r.cons, err = unix.Mmap(m.FD(), 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, fmt.Errorf("mapping the ring buffer's consumer page: %w", err)
	}
	if r.prod, err = unix.Mmap(m.FD(), int64(page), page+2*size, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		r.Close()
		return nil, fmt.Errorf("mapping the ring buffer's data: %w", err)
	}
	r.data = r.prod[page:]
	if r.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		r.Close()
		return nil, fmt.Errorf("epoll for the ring buffer: %w", err)
	}
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, m.FD(), &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		r.Close()
		return nil, fmt.Errorf("epoll for the ring buffer: %w", err)
	}
	return r, nil
}

func (r *Reader) consPos() uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.cons[0]))) }
func (r *Reader) prodPos() uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.prod[0]))) }

// Stuck counts the records stepped over, never committed. Safe to call
// while another goroutine reads.
func (r *Reader) Stuck() uint64 { return r.stuck.Load() }

// AvailableBytes is what the producers have reserved and the reader not read.
func (r *Reader) AvailableBytes() int { return int(r.prodPos() - r.consPos()) }

func (r *Reader) SetDeadline(t time.Time) { r.deadline = t }

// ReadInto copies the next record into *raw (its capacity reused): a
// committed one, or with ErrStuck one never committed. Past the deadline
// with nothing to read, it returns os.ErrDeadlineExceeded.
func (r *Reader) ReadInto(raw *[]byte) error {
	for {
		cons, prod := r.consPos(), r.prodPos()
		if cons == prod {
			if err := r.wait(); err != nil {
				return err
			}
			continue
		}
		// The header is read atomically: its store in the kernel (xchg)
		// orders the record's data before it.
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.data[cons&r.mask])))
		var now time.Time // the clock only for a busy record: this is the hot path
		if hdr&ringBusyBit != 0 {
			now = time.Now()
		}
		next, step := r.classify(cons, prod, hdr, now)
		start := (cons + HeaderBytes) & r.mask
		n := uint64(hdr &^ (ringBusyBit | ringDiscardBit))
		switch step {
		case ringWait:
			if now.After(r.deadline) {
				return os.ErrDeadlineExceeded
			}
			time.Sleep(50 * time.Microsecond) // the producer is writing it: let it run
			continue
		case ringRecord:
			*raw = append((*raw)[:0], r.data[start:start+n]...)
		case ringStuck:
			*raw = append((*raw)[:0], r.data[start:start+n]...)
		case ringCorrupt:
			return fmt.Errorf("ring buffer: record header %#x at %d runs past the producer's %d", hdr, cons, prod)
		}
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.cons[0])), next)
		switch step {
		case ringRecord:
			return nil
		case ringStuck:
			return ErrStuck
		}
	}
}

type ringStep int

const (
	ringRecord  ringStep = iota // a committed record: read it
	ringSkip                    // discarded: step over it
	ringStuck                   // reserved too long ago: lost, hand it over and step over it
	ringWait                    // reserved, being written
	ringCorrupt                 // a length past what was reserved
)

// classify says what to do with the record at cons whose header is hdr, and
// where the next one starts. It keeps when it first saw a busy record there.
func (r *Reader) classify(cons, prod uint64, hdr uint32, now time.Time) (next uint64, step ringStep) {
	n := uint64(hdr &^ (ringBusyBit | ringDiscardBit))
	next = cons + uint64(RecordBytes(int(n)))
	if next > prod || n > r.mask {
		return next, ringCorrupt
	}
	switch {
	case hdr&ringBusyBit != 0:
		if r.busySince.IsZero() || r.busyAt != cons {
			r.busyAt, r.busySince = cons, now
		}
		if now.Sub(r.busySince) < StuckAfter {
			return next, ringWait
		}
		r.stuck.Add(1)
		r.busySince = time.Time{}
		return next, ringStuck
	case hdr&ringDiscardBit != 0:
		return next, ringSkip
	}
	return next, ringRecord
}

// wait blocks until the kernel signals new data or the deadline passes.
func (r *Reader) wait() error {
	left := time.Until(r.deadline)
	if left <= 0 {
		return os.ErrDeadlineExceeded
	}
	ms := int(left.Milliseconds())
	if ms == 0 {
		ms = 1
	}
	_, err := unix.EpollWait(r.epfd, r.ev, ms)
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("waiting on the ring buffer: %w", err)
	}
	return nil
}

func (r *Reader) Close() error {
	if r.epfd >= 0 {
		unix.Close(r.epfd)
		r.epfd = -1
	}
	for _, m := range [][]byte{r.cons, r.prod} {
		if m != nil {
			_ = unix.Munmap(m)
		}
	}
	r.cons, r.prod, r.data = nil, nil, nil
	return nil
}
