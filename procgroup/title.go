// Package procgroup finds the processes of one inference server and which
// of them runs each stage. vLLM with tensor parallelism runs the model in
// one worker process per rank and its scheduler in EngineCore; SGLang runs
// one scheduler process per rank under its launcher. The processes are told
// apart by the titles they give themselves (setproctitle:
// "VLLM::Worker_TP0", "sglang::scheduler_TP1") and related by the kernel's
// parent links, which no process can forge: a title only ever selects among
// processes the server itself started.
package procgroup

import (
	"regexp"
	"strconv"
	"strings"
)

// Title is a process title of the form <prefix>::<name>[_<RANK><n>]...
type Title struct {
	Prefix string // "VLLM", "sglang"
	Name   string // "Worker", "EngineCore", "scheduler"
	// Ranks in the order the title names them: "DP1", "TP0" ...
	Ranks []Rank
}

// Rank is one rank a title names.
type Rank struct {
	Kind string // TP, PP, DP, EP, DCP ...
	N    int
}

// NoRank is the rank of a kind a title does not name.
const NoRank = -1

// maxTitle bounds what is parsed: a title is a process's to write.
const maxTitle = 256

var (
	namePart = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`)
	rankPart = regexp.MustCompile(`^([A-Z]{1,4})([0-9]{1,6})$`)
)

// IsName tells whether s can be the name (or the prefix) in a title: what a
// spec's process list may name is what ParseTitle reads.
func IsName(s string) bool { return namePart.MatchString(s) }

// ParseTitle reads a title from the first argument of a command line
// (setproctitle writes the title there; a program run with exec -a has it
// as argv[0]). Only its first word counts. false when it is not a title.
func ParseTitle(argv0 string) (Title, bool) {
	s, _, _ := strings.Cut(argv0, "\x00")
	s, _, _ = strings.Cut(s, " ")
	if len(s) > maxTitle {
		return Title{}, false
	}
	prefix, rest, ok := strings.Cut(s, "::")
	if !ok || !namePart.MatchString(prefix) || !namePart.MatchString(rest) {
		return Title{}, false
	}
	parts := strings.Split(rest, "_")
	var ranks []Rank
	// Ranks are the trailing parts that look like one; the name keeps its
	// own underscores (sglang::data_parallel_controller).
	for len(parts) > 1 {
		m := rankPart.FindStringSubmatch(parts[len(parts)-1])
		if m == nil {
			break
		}
		n, _ := strconv.Atoi(m[2])
		ranks = append([]Rank{{Kind: m[1], N: n}}, ranks...)
		parts = parts[:len(parts)-1]
	}
	return Title{Prefix: prefix, Name: strings.Join(parts, "_"), Ranks: ranks}, true
}

// Rank returns the rank of kind the title names, NoRank if none.
func (t Title) Rank(kind string) int {
	for _, r := range t.Ranks {
		if r.Kind == kind {
			return r.N
		}
	}
	return NoRank
}

// String writes the title back.
func (t Title) String() string {
	if t.Name == "" {
		return ""
	}
	s := t.Prefix + "::" + t.Name
	for _, r := range t.Ranks {
		s += "_" + r.Kind + strconv.Itoa(r.N)
	}
	return s
}
