package pyproc

// attrs reads .name of every cursor. One read brings the bytes around each
// object (attr's hint: managed-dict words, header, dict slot, 3.13's inline
// values); what the type cache says of name then leads each cursor to one
// more read — its values array slot, its dict's header (then its values
// slot), its __slots__ slot — made for all cursors together. The cache
// knows a name once attr has found it for an instance of the type, so the
// first such instance goes through attr, and so does any cursor the plan
// does not fit (a combined dict, an unset value, a module).
func (b *batchEval) attrs(cur []*cursor, k int) []*cursor {
	hs := newSegs(len(cur))
	seg := make([]int, len(cur))
	for i, c := range cur {
		seg[i] = -1
		if validObj(c.obj) {
			seg[i] = hs.add(c.obj-hintBefore, hintLen)
		}
	}
	b.p.m.run(hs)
	a := attrLevel{batchEval: b, cur: cur, k: k, hs: hs, hint: seg}
	reads := make([]attrRead, len(cur))
	var pend []*attrRead
	for i, c := range cur {
		if seg[i] < 0 || hs.err[seg[i]] != nil {
			c.obj, c.err = b.attr(c.obj, b.steps[k].attr, b.where(c, k+1))
			continue
		}
		r := &reads[i]
		r.i = i
		if a.plan(r) {
			pend = append(pend, r)
		}
	}
	// A dict takes two rounds (header, values); nothing takes more. The
	// first also checks the shared-key indices the plans used.
	checks := map[*typeInfo]*sharedCheck{}
	for round := 0; round < 2 && len(pend) > 0; round++ {
		rs := newSegs(len(pend))
		for _, r := range pend {
			r.seg = -1
			if _, ok := a.inHint(r); !ok {
				r.seg = rs.add(r.addr, r.n)
			}
			if r.unchecked && checks[r.ti] == nil {
				checks[r.ti] = b.addCheck(rs, r.ti, b.steps[k].attr)
			}
		}
		b.p.m.run(rs)
		if round == 0 {
			for _, ck := range checks {
				b.settle(rs, ck)
			}
		}
		more := pend[:0]
		for _, r := range pend {
			blk, ok := a.inHint(r)
			var err error
			if !ok {
				blk, err = rs.block(r.seg)
			}
			switch {
			case err != nil || r.unchecked && !checks[r.ti].ok:
				a.slow(r)
			case !a.step(r, blk):
				more = append(more, r)
			}
		}
		pend = more
	}
	for _, r := range pend {
		a.slow(r)
	}
	return cur
}

// attrLevel is one attrs call: the cursors and their hints (segments of hs).
type attrLevel struct {
	*batchEval
	cur  []*cursor
	k    int
	hs   *segs
	hint []int
}

// attrRead is a cursor's next read for the attribute.
type attrRead struct {
	ti       *typeInfo
	addr, ix uint64
	i, n     int
	seg      int
	what     int // readDict, readValues or readSlot
	slotType int32
	// unchecked: ix comes from an earlier Eval and awaits its check.
	unchecked bool
}

const (
	readDict = iota
	readValues
	readSlot
)

// slow reads the attribute with attrWith, from the hint already read.
func (a *attrLevel) slow(r *attrRead) {
	c := a.cur[r.i]
	hint, _ := a.hs.block(a.hint[r.i])
	c.obj, c.err = a.attrWith(c.obj, hint, a.steps[a.k].attr, a.where(c, a.k+1))
}

// plan decides from the hint what to read next, as attrWith would look;
// false when it settled the cursor instead. The read may be in the hint.
func (a *attrLevel) plan(r *attrRead) bool {
	p, l := a.p, &a.p.layout
	c, name := a.cur[r.i], a.steps[a.k].attr
	hint, _ := a.hs.block(a.hint[r.i])
	t := hint.u64(hintBefore + 8)
	ti, err := a.typeInfo(t)
	if err != nil || t == p.types.module || ti.flags&flagTypeSubclass != 0 {
		a.slow(r)
		return false
	}
	r.ti = ti
	a.evaluator.hint = hint
	dict, values, err := a.instanceStore(c.obj, ti)
	sh, shared := ti.shared[name]
	r.ix, r.unchecked = uint64(sh.ix), sh.gen != a.tc.gen
	ca, onClass := ti.attrs[name]
	switch {
	case err != nil:
	case dict != 0 && shared && ti.cachedKeys != 0:
		r.what, r.addr, r.n = readDict, dict, int(l.DictValues)+8
		return true
	case values != 0 && shared:
		r.what, r.addr, r.n = readValues, values, int(l.DictValuesArray+8*r.ix)+8
		return true
	case dict != 0 || values != 0 || !onClass:
	case ca.member != 0 && ca.slotType != 0:
		r.what, r.addr, r.n, r.slotType, r.unchecked = readSlot, c.obj+uint64(ca.slotOff), 8, ca.slotType, false
		return true
	case ca.member == 0 && ca.computed == "" && ca.value != 0:
		c.obj = ca.value
		return false
	}
	a.slow(r)
	return false
}

// inHint returns r's read from the cursor's hint, if it holds it.
func (a *attrLevel) inHint(r *attrRead) (block, bool) {
	h, _ := a.hs.block(a.hint[r.i])
	if r.addr < h.addr || r.addr-h.addr+uint64(r.n) > uint64(len(h.b)) {
		return block{}, false
	}
	return block{r.addr, h.b[r.addr-h.addr : r.addr-h.addr+uint64(r.n)]}, true
}

// step takes the bytes read for r and says whether the cursor is settled.
func (a *attrLevel) step(r *attrRead, blk block) bool {
	p, l := a.p, &a.p.layout
	c := a.cur[r.i]
	switch r.what {
	case readDict:
		// A split dict on the class's shared keys: the index holds.
		keys, values := blk.u64(l.DictKeys), blk.u64(l.DictValues)
		if blk.u64(8) != p.types.dict || keys != r.ti.cachedKeys || values == 0 {
			break
		}
		r.what, r.addr, r.n, r.unchecked = readValues, values, int(l.DictValuesArray+8*r.ix)+8, false
		return false
	case readValues:
		// 3.13's values say how many slots they have (sharedValue).
		if l.DictValuesArray != 0 && r.ix >= uint64(blk.u8(0)) {
			break
		}
		if v := blk.u64(l.DictValuesArray + 8*r.ix); validObj(v) {
			c.obj = v
			return true
		}
	case readSlot:
		switch v := blk.u64(0); {
		case v == 0 && r.slotType == tObject && p.types.none != 0:
			c.obj = p.types.none
			return true
		case validObj(v):
			c.obj = v
			return true
		}
	}
	a.slow(r)
	return true
}
