package pyproc

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxStrLen bounds the strings we read (names, file paths): a longer length
// field means we are not looking at the string we think.
const maxStrLen = 1 << 16

type strHeader struct {
	length   int64
	hash     int64
	kind     uint32 // 1, 2 or 4 bytes per code point
	ascii    bool
	dataAddr uint64
}

// strHead reads and checks a str object's header.
func (p *Process) strHead(addr uint64) (strHeader, error) {
	l := &p.layout
	if !validObj(addr) {
		return strHeader{}, fmt.Errorf("bad str pointer %#x", addr)
	}
	// Only the fixed header: a short str can end right before an unmapped page.
	b, err := p.m.block(addr, int(l.UnicodeState)+4)
	if err != nil {
		return strHeader{}, err
	}
	return p.parseStrHead(addr, b)
}

// parseStrHead checks a str header already read into b (b.addr == addr).
func (p *Process) parseStrHead(addr uint64, b block) (strHeader, error) {
	l := &p.layout
	if t := b.u64(8); t != p.types.str {
		if err := p.checkSubtype(t, flagUnicodeSubclass, "str"); err != nil {
			return strHeader{}, err
		}
	}
	state := b.u32(l.UnicodeState)
	h := strHeader{
		length: int64(b.u64(l.UnicodeLength)),
		hash:   int64(b.u64(l.UnicodeHash)),
		kind:   state >> 2 & 7,
		ascii:  state>>6&1 == 1,
	}
	if state>>5&1 == 0 {
		return strHeader{}, fmt.Errorf("str at %#x is not compact", addr)
	}
	if h.length < 0 || h.length > maxStrLen {
		return strHeader{}, fmt.Errorf("str at %#x: length %d out of range", addr, h.length)
	}
	switch {
	case h.ascii && h.kind == 1:
		h.dataAddr = addr + l.ASCIIData
	case !h.ascii && (h.kind == 1 || h.kind == 2 || h.kind == 4):
		h.dataAddr = addr + l.CompactData
	default:
		return strHeader{}, fmt.Errorf("str at %#x: bad state %#x", addr, state)
	}
	return h, nil
}

// readStr returns a str's text as UTF-8.
func (p *Process) readStr(addr uint64) (string, error) {
	h, err := p.strHead(addr)
	if err != nil {
		return "", err
	}
	raw, err := p.m.bytes(h.dataAddr, int(h.length)*int(h.kind))
	if err != nil {
		return "", err
	}
	return decodeKind(raw, h.kind), nil
}

// DecodeStr turns a compact str's data into a Go string, as CPython stores
// it (PEP 393): each unit of kind bytes (1, 2 or 4) is one code point, so a
// 2-byte str holds no surrogate pairs to join, and a lone surrogate (or any
// value that is no code point) becomes U+FFFD. BPF's reads and user
// space's decode by this one rule.
func DecodeStr(raw []byte, kind uint32) string { return decodeKind(raw, kind) }

func decodeKind(raw []byte, kind uint32) string {
	if kind != 1 && kind != 2 && kind != 4 {
		return string(utf8.RuneError)
	}
	if kind == 1 && isASCII(raw) {
		return string(raw)
	}
	if kind == 1 {
		var sb strings.Builder
		for _, c := range raw {
			sb.WriteRune(rune(c))
		}
		return sb.String()
	}
	var sb strings.Builder
	for i := 0; i+int(kind) <= len(raw); i += int(kind) {
		var r rune
		if kind == 2 {
			r = rune(binary.LittleEndian.Uint16(raw[i:]))
		} else {
			r = rune(binary.LittleEndian.Uint32(raw[i:]))
		}
		if !utf8.ValidRune(r) {
			r = utf8.RuneError
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// encodeKind is the inverse: the bytes CPython stores (and hashes) for s.
func encodeKind(s string) (raw []byte, kind uint32) {
	kind = 1
	for _, r := range s {
		switch {
		case r > 0xffff:
			kind = 4
		case r > 0xff && kind < 2:
			kind = 2
		}
	}
	for _, r := range s {
		switch kind {
		case 1:
			raw = append(raw, byte(r))
		case 2:
			raw = binary.LittleEndian.AppendUint16(raw, uint16(r))
		default:
			raw = binary.LittleEndian.AppendUint32(raw, uint32(r))
		}
	}
	return raw, kind
}

// noHash asks strEquals to compare the text without the cached hash.
const noHash int64 = -1

// strEquals compares the str at addr with s without reading its data when
// the cached hash or the length already differ.
func (p *Process) strEquals(addr uint64, s string, hash int64) (bool, error) {
	h, err := p.strHead(addr)
	if err != nil {
		return false, err
	}
	if hash != noHash && h.hash != -1 && h.hash != hash {
		return false, nil
	}
	raw, kind := encodeKind(s)
	if kind != h.kind || int64(len(raw)) != h.length*int64(kind) {
		return false, nil
	}
	got, err := p.m.bytes(h.dataAddr, len(raw))
	if err != nil {
		return false, err
	}
	return string(got) == string(raw), nil
}

// strIs says whether b, the first bytes of a str, holds exactly s.
func (p *Process) strIs(b block, s string) bool {
	h, err := p.parseStrHead(b.addr, b)
	if err != nil {
		return false
	}
	raw, kind := encodeKind(s)
	off := h.dataAddr - b.addr
	return h.kind == kind && h.length*int64(kind) == int64(len(raw)) &&
		off+uint64(len(raw)) <= uint64(len(b.b)) && string(b.b[off:off+uint64(len(raw))]) == string(raw)
}
