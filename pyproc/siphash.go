package pyproc

import (
	"encoding/binary"
	"math/bits"
)

// sipHash is SipHash-c-(c+2) as CPython's pyhash.c computes it: siphash24
// (c=2) in 3.10, siphash13 (c=1) from 3.11. CPython hashes a str over its
// raw kind-width data, so for ASCII the bytes themselves.
func sipHash(k0, k1 uint64, rounds int, data []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	b := uint64(len(data)) << 56
	for len(data) >= 8 {
		m := binary.LittleEndian.Uint64(data)
		v3 ^= m
		for i := 0; i < rounds; i++ {
			round()
		}
		v0 ^= m
		data = data[8:]
	}
	var tail [8]byte
	copy(tail[:], data)
	b |= binary.LittleEndian.Uint64(tail[:])
	v3 ^= b
	for i := 0; i < rounds; i++ {
		round()
	}
	v0 ^= b
	v2 ^= 0xff
	for i := 0; i < rounds+2; i++ {
		round()
	}
	return v0 ^ v1 ^ v2 ^ v3
}

// strHash is hash(s) as the target computes it.
func (p *Process) strHash(s string) int64 {
	if len(s) == 0 {
		return 0
	}
	raw, _ := encodeKind(s)
	h := int64(sipHash(p.hashKey[0], p.hashKey[1], p.layout.SipHashRounds, raw))
	if h == -1 {
		h = -2
	}
	return h
}

// checkHash compares our hash of up to 64 keys with the hashes the target
// cached in them. One key whose cached hash equals ours settles it: our key
// and algorithm are the target's. Only when every key disagrees (a build
// with another hash algorithm) does every lookup scan instead. A process
// can write any bytes into its own strings, so one wrong cached hash must
// not decide it: that would turn every lookup into a scan.
func (p *Process) checkHash(v *dictView) {
	reread, mismatch := false, false
	for ix := uint64(0); ix < v.nentries && ix < 64; ix++ {
		k, _, _, err := p.dictEntry(v, ix)
		if err != nil || k == 0 {
			continue
		}
		h, err := p.strHead(k)
		if err != nil || h.hash == -1 {
			continue
		}
		s, err := p.readStr(k)
		if err != nil {
			continue
		}
		if p.strHash(s) == h.hash {
			p.hashOK = 1
			return
		}
		if !reread { // attached before the interpreter set its secret?
			reread = true
			if p.readHashKey() == nil && p.strHash(s) == h.hash {
				p.Stats.HashRereads++
				p.hashOK = 1
				return
			}
		}
		mismatch = true
	}
	if mismatch {
		p.hashOK = -1
	}
}
