// Package gpu samples the state of the GPUs a traced process uses through
// NVML, keeps a short history per GPU, and hands out the window that overlaps
// a stage (attributes for its span) and the latest values (metrics, summaries).
//
// NVML calls serialise on a driver lock that the inference server needs too,
// so the sampler reads the cheap fields on one timer, process lists and
// temperature on a slower one, GPM on its own, and never more often than
// docs/design.md allows. Nothing is called after a failed Init: with the library
// missing that would kill the process.
package gpu

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Device is one GPU as NVML names it.
type Device struct {
	Index    int
	UUID     string // GPU-…, the hw.id that joins with DCGM
	Name     string
	MemTotal uint64 // bytes
}

// backend is NVML behind the sampler; the no-cgo build has one that only fails.
type backend interface {
	// open initialises NVML and lists the GPUs. After an error nothing else
	// is called, not even close.
	open() ([]Device, error)
	pids(dev int) ([]uint32, error)
	// fast reads the cheap fields, and energy and memory when due.
	fast(dev int, s *Sample, energy, mem bool)
	slow(dev int, s *Sample)
	// gpm reports whether it computed new activity values.
	gpm(dev int, s *Sample) bool
	close()
}

// Sampler samples the GPUs one process uses. Its methods are safe to call
// from any goroutine; a nil or inactive Sampler adds nothing anywhere.
type Sampler struct {
	opts  Options
	b     backend
	calls *callStats

	mu     sync.RWMutex
	pid    uint32
	devs   []Device
	used   []bool      // by device: the PID has a compute context there
	rings  []*ring     // by device
	aggs   []aggregate // by device: the session so far, for the summary
	last   []Sample    // by device: carries slow fields into fast samples
	active bool        // open succeeded and the loop has not given up
	off    string      // why GPU state is off, for the summary
	cache  stageCache  // the last StageAttrs answer: batched calls repeat it

	nextProc, nextGPM, nextEnergy, nextMem time.Time
	windows                                []windows  // by device: energy windows (windows.go)
	steps                                  []stepMark // engine steps waiting for their window
	lastStep                               stepKey
	gpmAt                                  []time.Time      // by device: the last GPM sample taken
	counting                               bool             // KeepCounters was called
	pending                                []devSample      // samples for TakeCounters
	now                                    func() time.Time // tests drive a fake clock
	stop                                   chan struct{}
	done                                   chan struct{}
	log                                    io.Writer
}

func newSampler(b backend, opts Options) *Sampler {
	def := DefaultOptions()
	for _, f := range []struct{ v, d *time.Duration }{{&opts.History, &def.History},
		{&opts.EnergyInterval, &def.EnergyInterval}, {&opts.MemoryInterval, &def.MemoryInterval}, {&opts.WindowMin, &def.WindowMin}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return &Sampler{opts: opts, b: b, calls: newCallStats(), now: time.Now}
}

// Start initialises NVML, finds the GPUs pid uses and starts sampling. When
// GPU state is unavailable it writes one line to log, says why, and returns
// false; tracing goes on without GPU fields.
func (s *Sampler) Start(pid int, log io.Writer) bool {
	if s == nil || !s.begin(pid, log) {
		return false
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop()
	return true
}

// begin is Start without the sampling goroutine (tests drive rounds).
func (s *Sampler) begin(pid int, log io.Writer) bool {
	s.log, s.pid = log, uint32(pid)
	devs, err := s.b.open()
	if err == nil && len(devs) == 0 {
		err = fmt.Errorf("no NVIDIA GPU found")
		s.b.close()
	}
	if err != nil {
		s.off = err.Error()
		fmt.Fprintf(log, "specprobe: GPU state off: %v; tracing without GPU fields\n", err)
		return false
	}
	s.mu.Lock()
	s.devs, s.active = devs, true
	s.used = make([]bool, len(devs))
	s.last = make([]Sample, len(devs))
	s.rings = make([]*ring, len(devs))
	s.aggs = make([]aggregate, len(devs))
	s.windows = make([]windows, len(devs))
	s.gpmAt = make([]time.Time, len(devs))
	n := int(s.opts.History/s.opts.Interval) + 2
	for i := range devs {
		s.rings[i] = newRing(n)
	}
	s.mu.Unlock()
	if !s.safeRound(s.now()) {
		return false
	}
	fmt.Fprintln(log, s.startLine())
	return true
}

func (s *Sampler) startLine() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []string
	for i, u := range s.used {
		if u {
			ids = append(ids, fmt.Sprintf("%d (%s, %s)", s.devs[i].Index, s.devs[i].Name, s.devs[i].UUID))
		}
	}
	if s.pid == 0 {
		return fmt.Sprintf("specprobe: GPU state: sampling all %d GPUs every %s", len(s.devs), s.opts.Interval)
	}
	if len(ids) == 0 {
		return fmt.Sprintf("specprobe: GPU state: PID %d has no compute context on any of %d GPUs yet; looking again every %s", s.pid, len(s.devs), s.opts.ProcessInterval)
	}
	return fmt.Sprintf("specprobe: GPU state: PID %d uses GPU %v; sampling every %s", s.pid, ids, s.opts.Interval)
}

func (s *Sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if !s.safeRound(s.now()) {
				return
			}
		}
	}
}

// safeRound turns a panic inside NVML bindings (a mock without a stub, a
// binding bug) into GPU state going off, never into the end of tracing.
func (s *Sampler) safeRound(now time.Time) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			s.mu.Lock()
			s.active, s.off = false, fmt.Sprintf("sampling failed: %v", r)
			s.mu.Unlock()
			fmt.Fprintf(s.log, "specprobe: GPU state off: sampling failed (%v); tracing goes on without GPU fields\n", r)
			ok = false
		}
	}()
	s.round(now)
	return true
}

// round takes one sample of every GPU the PID uses, rescanning processes,
// temperature and GPM when their intervals are due.
func (s *Sampler) round(now time.Time) {
	if !now.Before(s.nextProc) {
		s.nextProc = now.Add(s.opts.ProcessInterval)
		s.scan()
	}
	doGPM := due(&s.nextGPM, now, s.opts.GPMInterval)
	doEnergy := due(&s.nextEnergy, now, s.opts.EnergyInterval)
	doMem := due(&s.nextMem, now, s.opts.MemoryInterval)
	for i, u := range s.used {
		if !u {
			continue
		}
		prev := s.last[i]
		smp := prev.carry()
		smp.Have &^= FEnergy // set again by a read: the windows key on reads
		s.b.fast(i, &smp, doEnergy, doMem)
		newGPM := doGPM && s.b.gpm(i, &smp)
		smp.At = s.now()
		if doMem && smp.Have&FMemUsed != 0 {
			smp.MemFrom, smp.MemAt = prev.MemAt, smp.At
		}
		if newGPM {
			smp.GPMFrom, smp.GPMAt = s.gpmAt[i], smp.At
		}
		if doGPM {
			s.gpmAt[i] = smp.At
		}
		energyRead := doEnergy && smp.Have&FEnergy != 0
		if !energyRead && prev.Have&FEnergy != 0 {
			smp.Have |= FEnergy // carried for the metrics; not a read
			smp.EnergyMJ = prev.EnergyMJ
		}
		s.mu.Lock()
		s.last[i] = smp
		s.rings[i].push(smp)
		s.aggs[i].add(smp)
		s.keep(i, smp)
		if energyRead {
			s.windows[i].read(smp.At, smp.EnergyMJ, s.opts.WindowMin)
		}
		s.mu.Unlock()
	}
}

// due reports whether a timer's time has come and sets its next one.
func due(next *time.Time, now time.Time, every time.Duration) bool {
	if now.Before(*next) {
		return false
	}
	*next = now.Add(every)
	return true
}

// scan finds the GPUs where the PID has a compute context and reads the slow
// fields of those.
func (s *Sampler) scan() {
	used := make([]bool, len(s.devs))
	for i := range s.devs {
		if s.pid == 0 { // the device check: every GPU
			used[i] = true
			continue
		}
		pids, err := s.b.pids(i)
		if err != nil {
			used[i] = s.used[i] // a failed list keeps what we knew
			continue
		}
		for _, p := range pids {
			if p == s.pid {
				used[i] = true
			}
		}
	}
	for i, u := range used {
		if u {
			s.b.slow(i, &s.last[i])
		}
	}
	s.mu.Lock()
	s.used = used
	s.mu.Unlock()
}

// Stop ends sampling and releases NVML. The history stays readable.
func (s *Sampler) Stop() {
	if s == nil || s.stop == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.stop = nil
	s.b.close()
}
