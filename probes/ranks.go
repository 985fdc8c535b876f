package probes

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// A server that runs a model over several GPUs runs one process per rank,
// and the ranks of one tensor-parallel group run the same stages on the
// same requests: tracing every one of them would make each span once per
// rank. Engines name a process's ranks in its title (setproctitle:
// sglang::scheduler_DP1_TP0, VLLM::Worker_TP1), so a spec may say how to
// read them (match.ranks), which one it traces (only), and under which
// resource attribute each goes on the spans.

// Rank is one parallelism rank named in a process's title.
type Rank struct {
	Name string // the key under match.ranks: tp, dp, pp, ...
	// Title's one capture group is the rank's decimal digits.
	Title *regexp.Regexp
	// Default is the rank of a process whose title does not name it (SGLang
	// names TP only when TP > 1); without one the process has no such rank.
	Default *int
	// Only, when set, is the rank traced: a process of another rank is
	// not (another process runs the same stages).
	Only      *int
	Attribute string // the resource attribute, e.g. sglang.tp_rank
	Line      int
}

// RankValue is one rank of a process.
type RankValue struct {
	Rank  *Rank
	Value int
}

// Limits of match.ranks: a rank past maxRankValue is no real GPU's, and a
// title pattern is a line, not a program.
const (
	maxRanks       = 4
	maxRankValue   = 1 << 16
	maxRankPattern = 512
)

// RankNames are the ranks SGLang's thread span names: tp, pp and dp
// (spanschema.Thread), in the order it writes them.
var RankNames = []string{"tp", "pp", "dp"}

var rankName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)

// ranks reads match.ranks: name: {title, default, only, attribute}.
func (p *parser) ranks(n *yaml.Node) []*Rank {
	if n.Kind != yaml.MappingNode {
		p.fail(n, "match.ranks: expected a mapping of rank name (tp, dp, ...) to {title, default, only, attribute}")
		return nil
	}
	if len(n.Content)/2 > maxRanks {
		p.fail(n, "match.ranks: %d ranks, at most %d", len(n.Content)/2, maxRanks)
		return nil
	}
	var out []*Rank
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		what := "match.ranks." + k.Value
		if !rankName.MatchString(k.Value) {
			p.fail(k, "match.ranks: %q is not a rank name (lower case, like tp or dp)", k.Value)
			continue
		}
		if slices.ContainsFunc(out, func(r *Rank) bool { return r.Name == k.Value }) {
			p.fail(k, "match.ranks: %q given twice", k.Value)
			continue
		}
		f := p.fields(v, what, "title", "default", "only", "attribute")
		r := &Rank{Name: k.Value, Line: v.Line}
		if t, ok := f["title"]; ok {
			r.Title = p.rankPattern(t, what+".title")
		} else {
			p.fail(v, "%s: missing title (a regular expression whose one group is the rank, e.g. '_TP([0-9]+)')", what)
		}
		if a, ok := f["attribute"]; ok {
			r.Attribute = p.str(a, what+".attribute")
			if r.Attribute != "" && !validName.MatchString(r.Attribute) {
				p.fail(a, "%s.attribute: %q is not an attribute name (letters, digits, _ and .)", what, r.Attribute)
			}
		}
		for key, dst := range map[string]**int{"default": &r.Default, "only": &r.Only} {
			if d, ok := f[key]; ok {
				x := p.int(d, what+"."+key)
				if x < 0 || x >= maxRankValue {
					p.fail(d, "%s.%s: %d is not a rank (0 to %d)", what, key, x, maxRankValue-1)
				}
				v := int(x)
				*dst = &v
			}
		}
		out = append(out, r)
	}
	return out
}

func (p *parser) rankPattern(n *yaml.Node, what string) *regexp.Regexp {
	s := p.str(n, what)
	if s == "" {
		return nil
	}
	if len(s) > maxRankPattern {
		p.fail(n, "%s: a pattern of %d bytes, at most %d", what, len(s), maxRankPattern)
		return nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		p.fail(n, "%s: %v", what, err)
		return nil
	}
	if re.NumSubexp() != 1 {
		p.fail(n, "%s: %q has %d groups; the rank is its one group (write others as (?:...))", what, s, re.NumSubexp())
		return nil
	}
	return re
}

// RanksOf reads a process's ranks from its title, in the spec's order; a
// rank the title does not name takes its default, or is left out. A rank
// the title names with more digits than any rank has is an error.
func (m *Match) RanksOf(title string) ([]RankValue, error) {
	var out []RankValue
	for _, r := range m.Ranks {
		sub := r.Title.FindStringSubmatch(title)
		switch {
		case sub != nil:
			v, err := strconv.Atoi(sub[1])
			if err != nil || v < 0 || v >= maxRankValue {
				return nil, fmt.Errorf("process title %q: %s rank %q is not a rank (0 to %d)", title, r.Name, sub[1], maxRankValue-1)
			}
			out = append(out, RankValue{r, v})
		case r.Default != nil:
			out = append(out, RankValue{r, *r.Default})
		}
	}
	return out, nil
}

// OtherRankError: the process is not the rank its spec traces.
type OtherRankError struct {
	Spec   *Spec
	Title  string
	Rank   RankValue
	Reason string // set when the title could not be read
}

func (e *OtherRankError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("spec %s traces one rank of each group, and %s", e.Spec.Engine, e.Reason)
	}
	r := e.Rank.Rank
	return fmt.Sprintf("%q is %s rank %d, and spec %s traces %s rank %d only: the ranks of a group run the same stages on the same requests, so one rank's spans are all of them",
		e.Title, r.Name, e.Rank.Value, e.Spec.Engine, r.Name, *r.Only)
}

// CheckRank tells whether the process titled title is a rank the spec
// traces; an *OtherRankError says why not. A spec that places its stages
// (Placed) takes any: it finds the ranks it traces among the server's
// processes (procgroup.Server.Place).
func (s *Spec) CheckRank(title string) error {
	if s.Placed() {
		return nil
	}
	ranks, err := s.Match.RanksOf(title)
	if err != nil {
		return &OtherRankError{Spec: s, Title: title, Reason: err.Error()}
	}
	for _, rv := range ranks {
		if rv.Rank.Only != nil && rv.Value != *rv.Rank.Only {
			return &OtherRankError{Spec: s, Title: title, Rank: rv}
		}
	}
	return nil
}

// Title is a process's title as setproctitle leaves it: its first argument.
func Title(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return strings.TrimSpace(args[0])
}

// PeerTitle is the title of the process the spec traces in place of the one
// titled title: the same title with each rank the spec traces one of set to
// that one (sglang::scheduler_TP1 -> sglang::scheduler_TP0). "" when the
// title names no such rank.
func (s *Spec) PeerTitle(title string) string {
	out, changed := title, false
	for _, r := range s.Match.Ranks {
		if r.Only == nil {
			continue
		}
		loc := r.Title.FindStringSubmatchIndex(out)
		if loc == nil || loc[2] < 0 {
			continue
		}
		out = out[:loc[2]] + strconv.Itoa(*r.Only) + out[loc[3]:]
		changed = true
	}
	if !changed || out == title {
		return ""
	}
	return out
}
