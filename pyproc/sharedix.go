package pyproc

// sharedIx is where a name sits in a type's shared keys (ht_cached_keys),
// kept across Evals. CPython only appends to shared keys while they live,
// and the type holds them, so the index would hold as long as the type
// does; but a forged process can rewrite a keys object in place. So an
// Eval that uses the index first reads the keys' header and that entry
// again and checks that its key is still the name (one more segment in a
// read the batch makes anyway).
type sharedIx struct {
	ix    int64
	keyAt uint64 // address of the entry's key pointer
	key   uint64 // the key str found there
	shape uint64 // the keys' size fields (see keysShape)
	gen   uint64 // the Eval that last checked it
}

// maxCheckRead bounds the keys bytes a check reads: shared keys hold at
// most 30 names in 3.11+ (SHARED_KEYS_MAX_SIZE), a few hundred bytes.
const maxCheckRead = maxTableRead

// keysShape is what fixes a keys object's layout: dk_size (3.10), or
// dk_log2_size, dk_log2_index_bytes and dk_kind (3.11+).
func (p *Process) keysShape(k block) uint64 {
	if p.layout.DictKeysLegacy {
		return k.u64(8)
	}
	return k.u64(8) & 0xffffff
}

// keysEntries is dk_nentries.
func (p *Process) keysEntries(k block) uint64 {
	if p.layout.DictKeysLegacy {
		return k.u64(0x20)
	}
	return k.u64(0x18)
}

// rememberShared records that name sits at entry ix of ti's shared keys,
// as v (those keys, opened) shows.
func (e *evaluator) rememberShared(ti *typeInfo, v *dictView, name string, ix int64) {
	if len(ti.shared) >= maxSharedNames {
		return
	}
	keyAt := v.entries + uint64(ix)*v.entrySize
	if v.hasHash {
		keyAt += 8
	}
	if keyAt+8-ti.cachedKeys > maxCheckRead {
		return
	}
	key, _, _, err := e.p.dictEntry(v, uint64(ix))
	if err != nil || !validObj(key) {
		return
	}
	ti.shared[name] = sharedIx{ix: ix, keyAt: keyAt, key: key, shape: v.shape, gen: e.tc.gen}
}

// sharedIndex is name's entry index in ti's shared keys, if this Eval has
// found or checked it.
func (e *evaluator) sharedIndex(ti *typeInfo, name string) (int64, bool) {
	sh, ok := ti.shared[name]
	return sh.ix, ok && sh.gen == e.tc.gen
}

// sharedCheck is one check of a sharedIx: its reads in a segs.
type sharedCheck struct {
	ti         *typeInfo
	name       string
	keys, strs int // segments: the keys through the entry, the key str
	ok         bool
}

// addCheck adds the reads that check ti's index of name to s.
func (e *evaluator) addCheck(s *segs, ti *typeInfo, name string) *sharedCheck {
	sh := ti.shared[name]
	return &sharedCheck{ti: ti, name: name,
		keys: s.add(ti.cachedKeys, int(sh.keyAt+8-ti.cachedKeys)), strs: s.add(sh.key, headRead)}
}

// settle decides a check from its reads: the keys keep their layout, hold
// the entry, and its key is the same str, which still reads as the name.
// A failed check drops the index, so the next lookup finds it afresh.
func (e *evaluator) settle(s *segs, c *sharedCheck) {
	p := e.p
	sh := c.ti.shared[c.name]
	k, err := s.block(c.keys)
	if err == nil {
		str, serr := s.block(c.strs)
		c.ok = serr == nil && p.keysShape(k) == sh.shape && uint64(sh.ix) < p.keysEntries(k) &&
			k.u64(sh.keyAt-k.addr) == sh.key && p.strIs(str, c.name)
	}
	if !c.ok {
		delete(c.ti.shared, c.name)
		return
	}
	sh.gen = e.tc.gen
	c.ti.shared[c.name] = sh
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
