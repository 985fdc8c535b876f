package pyproc

import (
	"sort"
	"strings"
)

// nearNames picks the candidates a user most likely meant: same name in
// another case, a shared dotted prefix or substring, or a small edit distance.
func nearNames(want string, have []string, limit int) []string {
	type scored struct {
		name  string
		score int
	}
	lw := strings.ToLower(want)
	var list []scored
	for _, h := range have {
		lh := strings.ToLower(h)
		d := editDistance(lw, lh)
		switch {
		case lh == lw:
			d = 0
		case strings.Contains(lh, lw) || strings.Contains(lw, lh) && len(lh) > 2:
			d = min(d, 2)
		case strings.HasPrefix(want, h+".") || strings.HasPrefix(h, parentOf(want)+"."):
			d = min(d, 3) // the same package
		}
		if d <= max(2, len(want)/3) || strings.HasPrefix(h, parentOf(want)+".") {
			list = append(list, scored{h, d})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].score != list[j].score {
			return list[i].score < list[j].score
		}
		return list[i].name < list[j].name
	})
	var out []string
	for i := 0; i < len(list) && i < limit; i++ {
		out = append(out, list[i].name)
	}
	return out
}

func parentOf(dotted string) string {
	if i := strings.LastIndexByte(dotted, '.'); i > 0 {
		return dotted[:i]
	}
	return "\x00" // matches nothing
}

// editDistance is the Levenshtein distance, capped in cost by short inputs
// (names), so no bound is needed.
func editDistance(a, b string) int {
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
