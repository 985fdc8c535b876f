package procgroup

import (
	"cmp"
	"fmt"
	"slices"
)

// Proc is one process as the grouping sees it.
type Proc struct {
	PID, PPID int
	UID       int    // real uid: a server's processes share their user
	Exe       string // the executable's path: a launcher runs the interpreter its ranks run
	Title     Title
	Titled    bool
}

// Table is what the grouping reads of the processes: the kernel's (Kernel)
// or a test's.
type Table interface {
	Proc(pid int) (Proc, bool)
	Children(pid int) []int
}

// Bounds of the walk: a server is a handful of processes a few levels deep
// (API server, EngineCore, its workers); a forged tree costs no more.
const (
	maxUp    = 4
	maxDepth = 4
	maxProcs = 256
)

// Server is the processes of one inference server, as found from one.
type Server struct {
	Attached Proc
	// Procs holds the attached process and the others of its server: up
	// from it through parents of the same user whose title has the same
	// prefix, and one more untitled one running the same executable (a
	// launcher: SGLang's, vLLM's API server); then everything of that user
	// under the topmost of them; with data parallelism only the attached
	// process's DP group. By PID.
	Procs []Proc
}

// Find returns the server of pid. A process without a title is a server of
// its own and its children (a launcher whose children are titled).
func Find(t Table, pid int) (Server, bool) {
	self, ok := t.Proc(pid)
	if !ok {
		return Server{}, false
	}
	root := self
	for range maxUp {
		if !self.Titled {
			break
		}
		parent, ok := t.Proc(root.PPID)
		if !ok || parent.PID == root.PID || parent.UID != self.UID {
			break
		}
		if !parent.Titled {
			if parent.Exe != "" && parent.Exe == self.Exe {
				root = parent
			}
			break
		}
		if parent.Title.Prefix != self.Title.Prefix {
			break
		}
		root = parent
	}
	dp := self.Title.Rank("DP")
	seen := map[int]bool{}
	var procs []Proc
	level := []Proc{root}
	for depth := 0; depth <= maxDepth && len(level) > 0 && len(procs) < maxProcs; depth++ {
		var next []Proc
		for _, p := range level {
			if seen[p.PID] || len(procs) >= maxProcs {
				continue
			}
			seen[p.PID] = true
			if p.UID != self.UID {
				continue // not the server's: neither it nor what it started
			}
			if r := p.Title.Rank("DP"); dp == NoRank || r == NoRank || r == dp {
				procs = append(procs, p)
			}
			for _, c := range t.Children(p.PID) {
				if cp, ok := t.Proc(c); ok && cp.PPID == p.PID {
					next = append(next, cp)
				}
			}
		}
		level = next
	}
	if !seen[self.PID] || !slices.ContainsFunc(procs, func(p Proc) bool { return p.PID == self.PID }) {
		procs = append(procs, self)
	}
	slices.SortFunc(procs, func(a, b Proc) int { return cmp.Compare(a.PID, b.PID) })
	return Server{Attached: self, Procs: procs}, true
}

// Place returns the processes of s a stage runs in, given the title names
// its spec allows in order of preference (vLLM's verify: "Worker", then
// "EngineCore" where no worker process runs the model): those of the first
// name some process has, one per DP group, the group's lead (its lowest
// ranks: TP rank 0). nil when no process has any of the names: the stage
// runs where the user attached. Two leads alike (two servers under one
// parent) are an error, unless one is the attached process.
func (s Server) Place(names []string) ([]Proc, error) {
	for _, name := range names {
		best := map[int][]Proc{} // per DP group, the processes of its lowest ranks
		for _, p := range s.Procs {
			if !p.Titled || p.Title.Name != name {
				continue
			}
			dp := p.Title.Rank("DP")
			switch cur := best[dp]; {
			case len(cur) == 0 || rankOrder(p, cur[0]) < 0:
				best[dp] = []Proc{p}
			case rankOrder(p, cur[0]) == 0:
				best[dp] = append(cur, p)
			}
		}
		if len(best) == 0 {
			continue
		}
		var out []Proc
		for _, alike := range best {
			lead, err := s.pick(alike)
			if err != nil {
				return nil, err
			}
			out = append(out, lead)
		}
		slices.SortFunc(out, func(a, b Proc) int { return cmp.Compare(a.Title.Rank("DP"), b.Title.Rank("DP")) })
		return out, nil
	}
	return nil, nil
}

// pick takes the one of processes alike in title and ranks: the attached
// one if it is among them; several others mean two servers were taken for one.
func (s Server) pick(alike []Proc) (Proc, error) {
	for _, p := range alike {
		if p.PID == s.Attached.PID {
			return p, nil
		}
	}
	if len(alike) > 1 {
		return Proc{}, fmt.Errorf("PIDs %d and %d are both %s (two servers started by PID %d?): attach to the one meant", alike[0].PID, alike[1].PID, alike[0].Title, alike[0].PPID)
	}
	return alike[0], nil
}

// rankOrder orders two processes of one DP group: every rank but DP's and
// EP's (an expert-parallel rank follows the others) compared in the
// title's order.
func rankOrder(a, b Proc) int {
	return slices.Compare(groupRanks(a.Title), groupRanks(b.Title))
}

func groupRanks(t Title) []int {
	var out []int
	for _, r := range t.Ranks {
		if r.Kind != "DP" && r.Kind != "EP" {
			out = append(out, r.N)
		}
	}
	return out
}
