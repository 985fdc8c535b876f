package tracer

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/specprobe/specprobe/loader"
	"github.com/specprobe/specprobe/probes"
	"github.com/specprobe/specprobe/procgroup"
	"github.com/specprobe/specprobe/spanbuilder"
)

// procTrace is one process of the traced server and what runs in it. A
// spec whose stages name no process (probes.Stage.Process) has one, the
// process attached.
type procTrace struct {
	pid     int
	title   string       // its process title, "" if it has none
	spec    *probes.Spec // the spec with this process's stages only
	stream  uint32       // its DP group: the count matching's stream
	targets []loader.Target
	py      *pySession
	sess    *loader.Session
	cuda    *loader.CUDATarget // nil: not probed
	base    int                // its first site among the builder's
	swept   time.Time          // when every thread it knows was last checked for exit
	readTo  uint64             // boot ns before which its every event has been read
}

// sweepEvery is how often every thread a process's state is kept for is
// checked for exit; threads with a call open are checked at each drain.
const sweepEvery = time.Second

// checked is the threads to check for exit now: those with a call open,
// and once a sweepEvery every thread the builder or the Python side keeps
// state for, so that state dies with its thread (its ID is given to new
// threads) instead of growing for as long as the target runs.
func (p *procTrace) checked(open []uint32, b *spanbuilder.Builder) []uint32 {
	now := time.Now()
	if now.Sub(p.swept) < sweepEvery {
		return open
	}
	p.swept = now
	tids := append(b.Threads(uint32(p.pid)), p.py.threads()...)
	slices.Sort(tids)
	return slices.Compact(tids)
}

// placeStages finds the processes of the server of cfg.PID that run the
// spec's stages (procgroup.Server.Place), the process of the verify first:
// its process is the one the resource describes, the one that makes spans.
func placeStages(cfg Config) ([]*procTrace, error) {
	placed := false
	for _, st := range cfg.Spec.Stages {
		placed = placed || len(st.Process) > 0
	}
	if !placed {
		return []*procTrace{{pid: cfg.PID, spec: cfg.Spec}}, nil
	}
	server, ok := procgroup.Find(&procgroup.Kernel{}, cfg.PID)
	if !ok {
		// Gone, or unreadable: attaching says which, with the usual words.
		return []*procTrace{{pid: cfg.PID, spec: cfg.Spec}}, nil
	}
	var out []*procTrace
	byPID := map[int]*procTrace{}
	for _, name := range append([]string{probes.Verify}, probes.ProbedStages...) {
		st := cfg.Spec.Stages[name]
		if st == nil {
			continue
		}
		procs, err := server.Place(st.Process)
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", name, err)
		}
		if procs == nil {
			procs = []procgroup.Proc{server.Attached}
		}
		for _, p := range procs {
			t := byPID[p.PID]
			if t == nil {
				spec := *cfg.Spec
				spec.Stages = map[string]*probes.Stage{}
				t = &procTrace{pid: p.PID, title: p.Title.String(), spec: &spec, stream: uint32(p.Title.Rank("DP") + 1)}
				byPID[p.PID] = t
				out = append(out, t)
			}
			t.spec.Stages[name] = st
		}
	}
	if len(out) > 1 || out[0].pid != cfg.PID {
		describePlacement(cfg.Log, server.Attached, out)
	}
	return out, nil
}

// describePlacement says where a server's stages run, when that is not
// simply the process attached.
func describePlacement(w io.Writer, attached procgroup.Proc, procs []*procTrace) {
	name := ""
	if attached.Titled {
		name = " (" + attached.Title.String() + ")"
	}
	var parts []string
	for _, p := range procs {
		parts = append(parts, fmt.Sprintf("PID %d (%s): %s", p.pid, p.label(), strings.Join(p.stages(), ", ")))
	}
	fmt.Fprintf(w, "specprobe: PID %d%s is a process of a server whose stages run in %s\n", attached.PID, name, strings.Join(parts, "; "))
}

// stages names the stages that run in the process, in stage order.
func (p *procTrace) stages() []string {
	var out []string
	for _, name := range probes.ProbedStages {
		if p.spec.Stages[name] != nil {
			out = append(out, name)
		}
	}
	return out
}

func (p *procTrace) label() string {
	if p.title != "" {
		return p.title
	}
	return loader.Label(p.pid)
}

// counter is what pyCalls tells the count matching: the CountMatcher
// itself where one process runs the verifies and the accepts
// (directCounts), through orderedCounts where they run in different ones.
type counter interface {
	Verify(key spanbuilder.VerifyKey, rids []string)
	Counts(tid uint32, at uint64, rids []string, counts []int64)
	Unreadable(tid uint32, at uint64)
	LostOn(tid uint32, at uint64)
	Gone(tid uint32, at uint64) // the thread exited
}

type directCounts struct{ m *spanbuilder.CountMatcher }

func (d directCounts) Verify(key spanbuilder.VerifyKey, rids []string) {
	d.m.Verify(key, rids)
}
func (d directCounts) Counts(tid uint32, _ uint64, rids []string, counts []int64) {
	d.m.Counts(tid, rids, counts)
}
func (d directCounts) Unreadable(tid uint32, _ uint64) { d.m.Unreadable(tid) }
func (d directCounts) LostOn(tid uint32, _ uint64)     { d.m.LostOn(tid) }
func (d directCounts) Gone(tid uint32, _ uint64)       { d.m.Forget(tid) }

// orderedCounts hands one process's verifies and reads of counts to the
// matching in the order they happened among the server's processes: each
// process's ring buffer is read on its own, so a read of counts in
// EngineCore can arrive before the verify it is for, traced in a worker.
// A verify's steps are held (LateAccept.Expect) at once; its place among
// the reads is taken when the merge lets it go.
type orderedCounts struct {
	src   int
	merge *spanbuilder.Merge[func()]
	match *spanbuilder.CountMatcher
	late  *spanbuilder.LateAccept
}

func (o orderedCounts) Verify(key spanbuilder.VerifyKey, rids []string) {
	o.late.Expect(key, len(rids))
	o.merge.Add(o.src, key.End, func() { o.match.Traced(key, rids) })
}
func (o orderedCounts) Counts(tid uint32, at uint64, rids []string, counts []int64) {
	o.merge.Add(o.src, at, func() { o.match.Counts(tid, rids, counts) })
}
func (o orderedCounts) Unreadable(tid uint32, at uint64) {
	o.merge.Add(o.src, at, func() { o.match.Unreadable(tid) })
}
func (o orderedCounts) LostOn(tid uint32, at uint64) {
	o.merge.Add(o.src, at, func() { o.match.LostOn(tid) })
}
func (o orderedCounts) Gone(tid uint32, at uint64) {
	o.merge.Add(o.src, at, func() { o.match.Forget(tid) })
}

// markMargin is how long before an event's time another event of the same
// ring buffer may still be on its way: from a probe's reading of the clock
// to its reserving room in the ring buffer, which the reads at a trap take
// well under a millisecond of. Ample, at no cost but latency.
const markMargin = uint64(50 * time.Millisecond)

func marked(t uint64) uint64 {
	if t < markMargin {
		return 0
	}
	return t - markMargin
}

// runProcesses reads the ring buffer of every process at once, each in its
// own goroutine, handing their events to add and their ticks to tick one
// at a time. It returns when stop closes or one of the processes exits
// (the server is going down: the others follow), with the PID that exited.
func runProcesses(procs []*procTrace, stop <-chan struct{}, interval time.Duration, add func(i int, e *spanbuilder.Event), tick func(i int)) (exited int, err error) {
	var mu sync.Mutex
	done := make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(done) }) }
	go func() {
		select {
		case <-stop:
			end()
		case <-done:
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	gone := make([]bool, len(procs))
	for i, p := range procs {
		wg.Go(func() {
			gone[i], errs[i] = p.sess.Run(done,
				interval,
				func(e *spanbuilder.Event) { mu.Lock(); add(i, e); mu.Unlock() },
				func() { mu.Lock(); tick(i); mu.Unlock() })
			end()
		})
	}
	wg.Wait()
	for i, p := range procs {
		if err == nil {
			err = errs[i]
		}
		if gone[i] && exited == 0 {
			exited = p.pid
		}
	}
	return exited, err
}

// ServerProcessError: the process belongs to a server whose session starts
// from another of its processes (CheckLead), which traces this one's stages too.
type ServerProcessError struct {
	PID, Lead int
	LeadTitle string
}

func (e *ServerProcessError) Error() string {
	return fmt.Sprintf("PID %d is a process of a server traced from PID %d (%s), whose session traces its stages too", e.PID, e.Lead, e.LeadTitle)
}

// Placed is one process of a server and the stages of a spec it runs.
type Placed struct {
	PID    int
	Label  string       // its title, or its executable
	Spec   *probes.Spec // the spec with this process's stages only
	Stages []string     // their names, in stage order
}

// Place says which processes of pid's server run which of spec's stages,
// the verify's first: what attach traces (a spec that names no process:
// pid with every stage).
func Place(spec *probes.Spec, pid int) ([]Placed, error) {
	procs, err := placeStages(Config{PID: pid, Spec: spec, Log: io.Discard})
	if err != nil {
		return nil, err
	}
	out := make([]Placed, len(procs))
	for i, p := range procs {
		out[i] = Placed{PID: p.pid, Label: p.label(), Spec: p.spec, Stages: p.stages()}
	}
	return out, nil
}

// CheckLead tells whether a session for pid with spec is the one its server
// needs: with stages placed in several processes, any of them finds the
// others, so the daemon, which sees them all, starts one session per
// server (per DP group), from the process of the verify.
func CheckLead(spec *probes.Spec, pid int) error {
	if !spec.Placed() {
		return nil
	}
	procs, err := Place(spec, pid)
	if err != nil || procs[0].PID == pid {
		return err
	}
	return &ServerProcessError{PID: pid, Lead: procs[0].PID, LeadTitle: procs[0].Label}
}
