package pyproc

// attrs reads .name of every cursor. One read brings the bytes around each
// object (attr's hint: managed-dict words, header, dict slot, 3.13's inline
// values); what the type cache says of name then leads each cursor to one
// more read — its values array slot, its __slots__ slot, or its dict's
// header, then its values slot or its keys through the name's entry —
// made for all cursors together. The cache knows a name once attr has
// found it for an instance of the type, so the first such instance goes
// through attr, and so does any cursor the plan does not fit (an unset
// value, a module, a dict whose keys hold the name elsewhere).
func (b *batchEval) attrs(cur []*cursor, k int) []*cursor {
	hs := newSegs(len(cur))
	seg := make([]int, len(cur))
	for i, c := range cur {
		seg[i] = -1
		if validObj(c.obj) {
			seg[i] = hs.add(c.obj-hintBefore, hintLen)
		}
	}
	b.p.run(hs)
	a := attrLevel{batchEval: b, cur: cur, k: k, hs: hs, hint: seg, hash: b.p.strHash(b.steps[k].attr)}
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
	// first also checks the memos the plans took from earlier Evals.
	checks := map[*memo]proofCheck{}
	for round := 0; round < 2 && len(pend) > 0; round++ {
		rs := newSegs(len(pend) + 8)
		for _, r := range pend {
			r.seg = -1
			if _, ok := a.inHint(r); !ok && r.what != readNone {
				r.seg = rs.add(r.addr, r.n)
			}
			for _, m := range r.memos {
				if _, ok := checks[m]; m != nil && m.gen != b.tc.gen && !ok {
					checks[m] = addCheck(rs, m)
				}
			}
		}
		b.p.run(rs)
		for _, c := range checks {
			if c.m.gen != b.tc.gen && !c.m.bad {
				b.settle(rs, c)
			}
		}
		more := pend[:0]
		for _, r := range pend {
			blk, ok := a.inHint(r)
			var err error
			if !ok && r.seg >= 0 {
				blk, err = rs.block(r.seg)
			}
			switch {
			case err != nil || r.memos[0] != nil && r.memos[0].bad || r.memos[1] != nil && r.memos[1].bad:
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
	hash int64    // the name's hash, for probes
	view dictView // the keys step decodes a cursor's keys into
}

// attrRead is a cursor's next read for the attribute.
type attrRead struct {
	ti       *typeInfo
	addr, ix uint64
	i, n     int
	seg      int
	what     int // readDict, readValues, readKeys, readSlot, or readNone: a class attribute
	slotType int32
	memos    [2]*memo // what the plan rests on: it waits for their checks
	found    bool     // the shared keys hold the name, at ix
	dk       *dictKeyMemo
}

const (
	readDict = iota
	readValues
	readKeys
	readSlot
	readNone
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
	sm, cm, dk := ti.shared[name], ti.attrs[name], ti.dictKeys[name]
	known := sm != nil && a.usable(&sm.memo)
	onClass := cm != nil && a.usable(&cm.memo)
	if known {
		r.ix, r.found, r.memos[0] = uint64(sm.ix), sm.found, &sm.memo
	}
	if dk != nil && a.usable(&dk.memo) && p.hashOK > 0 {
		r.dk = dk
	}
	switch {
	case err != nil:
	case dict != 0:
		// A split dict on the shared keys or other keys, or a combined
		// one: its header tells which.
		r.what, r.addr, r.n = readDict, dict, int(l.DictValues)+8
		if r.dk != nil {
			r.memos[1] = &r.dk.memo
		}
		return true
	case values != 0 && r.found:
		r.what, r.addr, r.n = readValues, values, int(l.DictValuesArray+8*r.ix)+8
		return true
	case values != 0 && !known, !onClass:
		// Values that may hold the name, or a class not looked at yet:
		// for attrWith.
	case cm.member != 0 && cm.slotType != 0:
		r.what, r.addr, r.n, r.slotType, r.memos[1] = readSlot, c.obj+uint64(cm.slotOff), 8, cm.slotType, &cm.memo
		return true
	case cm.member == 0 && cm.computed == "" && cm.value != 0:
		r.what, r.addr, r.memos[1] = readNone, cm.value, &cm.memo
		return true
	}
	a.slow(r)
	return false
}

// inHint returns r's read from the cursor's hint, if it holds it.
func (a *attrLevel) inHint(r *attrRead) (block, bool) {
	if r.what == readNone {
		return block{}, true
	}
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
	case readNone:
		c.obj = r.addr
		return true
	case readDict:
		// A split dict on the class's shared keys: the index holds. A
		// combined one: its keys through the entry the name sat at.
		keys, values := blk.u64(l.DictKeys), blk.u64(l.DictValues)
		name := a.steps[a.k].attr
		ix, other := a.shared[sharedKey{keys, name}]
		split := keys == r.ti.cachedKeys && keys != 0
		// An earlier cursor's lookup in this round may have found what the
		// plan did not know yet.
		if sm := r.ti.shared[name]; !r.found && sm != nil && sm.gen == a.tc.gen && !sm.bad && sm.found {
			r.ix, r.found = uint64(sm.ix), true
		}
		if dk := r.ti.dictKeys[name]; r.dk == nil && dk != nil && dk.gen == a.tc.gen && !dk.bad && p.hashOK > 0 {
			r.dk = dk
		}
		switch {
		case blk.u64(8) != p.types.dict:
			break
		case values != 0 && split && r.found:
			r.what, r.addr, r.n = readValues, values, int(l.DictValuesArray+8*r.ix)+8
			return false
		case values != 0 && !split && other:
			// Split keys the class no longer shares: found in this Eval.
			r.ix, r.memos[0] = uint64(ix), nil
			r.what, r.addr, r.n = readValues, values, int(l.DictValuesArray+8*r.ix)+8
			return false
		case values == 0 && r.dk != nil && validObj(keys):
			r.what, r.addr, r.n = readKeys, keys, r.dk.n
			return false
		}
	case readKeys:
		v := &a.view
		if err := p.keysView(v, blk, 0, "", false); err != nil {
			break
		}
		v.table = blk
		if val, sure := p.probeKnown(v, r.dk.key, r.dk.others, a.hash); sure {
			c.obj = val // as dictAttr gives it: the next step checks it
			return true
		}
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
