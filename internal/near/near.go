// Package near ranks the names a user most likely meant, for "not found"
// messages that suggest close names.
package near

import "sort"

// Distance is the Levenshtein distance between two names. Names are short;
// past 256 bytes it gives up and returns the longer length.
func Distance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// List collects candidates with a score, lower is closer.
type List struct {
	items []item
}

type item struct {
	name  string
	score int
}

// Add records a candidate.
func (l *List) Add(name string, score int) { l.items = append(l.items, item{name, score}) }

// Best returns up to limit names, closest first, ties by name.
func (l *List) Best(limit int) []string {
	sort.Slice(l.items, func(i, j int) bool {
		if l.items[i].score != l.items[j].score {
			return l.items[i].score < l.items[j].score
		}
		return l.items[i].name < l.items[j].name
	})
	var out []string
	for i := 0; i < len(l.items) && i < limit; i++ {
		out = append(out, l.items[i].name)
	}
	return out
}
