package pyproc

import "testing"

// One rule decodes a str for the BPF reader's payloads (loader) and for user
// space's reads: the two copies once disagreed on a 2-byte str holding a
// surrogate pair, which CPython never makes of one character (a character
// past U+FFFF makes the str 4-byte) but a program can build from lone
// surrogates ("\ud83d\ude00").
func TestDecodeStr(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  []byte
		kind uint32
		want string
	}{
		{"ascii", []byte("rid-1"), 1, "rid-1"},
		{"latin-1", []byte{'c', 0xe9}, 1, "cé"},
		{"ucs-2", []byte{0xe9, 0, 0x41, 0x26}, 2, "é\u2641"},
		{"ucs-2 lone surrogates stay two characters", []byte{0x3d, 0xd8, 0x00, 0xde}, 2, "\uFFFD\uFFFD"},
		{"ucs-4", []byte{0x00, 0xf6, 0x01, 0x00}, 4, "😀"},
		{"ucs-4 past U+10FFFF", []byte{0x00, 0x00, 0x11, 0x00}, 4, "\uFFFD"},
		{"a kind CPython has not", []byte{1, 2, 3}, 3, "\uFFFD"},
		{"odd trailing bytes ignored", []byte{0x41, 0x00, 0x42}, 2, "A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecodeStr(tc.raw, tc.kind); got != tc.want {
				t.Errorf("DecodeStr(%x, %d) = %q, want %q", tc.raw, tc.kind, got, tc.want)
			}
		})
	}
}
