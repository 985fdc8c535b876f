package procfs

import (
	"strings"
	"testing"
)

// FuzzParseMaps: whatever the text, parsing ends without a panic, and every
// mapping it returns is well formed.
func FuzzParseMaps(f *testing.F) {
	f.Add("7f1c2a000000-7f1c2a1d5000 r-xp 00028000 fd:01 1314 /usr/lib/libc.so.6\n00400000-00401000 r-xp 00000000 08:02 77   /a b (deleted)\n")
	f.Add("1-2 rwxp 0 0:0 0\n\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		_ = ParseMaps(strings.NewReader(text), func(m Map) bool {
			if m.End < m.Start || len(m.Perms) != 4 || strings.Contains(m.Path, "\n") {
				t.Fatalf("malformed mapping %+v", m)
			}
			return true
		})
	})
}

func FuzzParseStat(f *testing.F) {
	f.Add("4242 (a b) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0")
	f.Fuzz(func(t *testing.T, text string) {
		_, _ = ParseStat(text)
		_, _ = ParseStatus(text)
	})
}
