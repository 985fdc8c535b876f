package pyproc

import (
	"strings"

	"github.com/specprobe/specprobe/internal/near"
)

// nearNames picks the candidates a user most likely meant: same name in
// another case, a shared dotted prefix or substring, or a small edit distance.
func nearNames(want string, have []string, limit int) []string {
	lw := strings.ToLower(want)
	var list near.List
	for _, h := range have {
		lh := strings.ToLower(h)
		d := near.Distance(lw, lh)
		switch {
		case lh == lw:
			d = 0
		case strings.Contains(lh, lw) || strings.Contains(lw, lh) && len(lh) > 2:
			d = min(d, 2)
		case strings.HasPrefix(want, h+".") || strings.HasPrefix(h, parentOf(want)+"."):
			d = min(d, 3) // the same package
		}
		if d <= max(2, len(want)/3) || strings.HasPrefix(h, parentOf(want)+".") {
			list.Add(h, d)
		}
	}
	return list.Best(limit)
}

func parentOf(dotted string) string {
	if i := strings.LastIndexByte(dotted, '.'); i > 0 {
		return dotted[:i]
	}
	return "\x00" // matches nothing
}
