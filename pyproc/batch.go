package pyproc

import "strconv"

// batch evaluates steps from obj level by level. Every object the path has
// reached so far (each item of each [*]) is a cursor; a step reads what it
// needs of all cursors in one vectored read (list headers, then item
// arrays; the bytes around each instance, then the values or dicts they
// point at; each str's header with the start of its text). What the batch
// has no fast way for (a dict key, a type seen for the first time, an
// attribute not yet found in its class's shared keys, anything unusual or
// wrong) is read for that cursor alone by the item-by-item code, with what
// the batch already read where it can take it, so results and errors are
// the same.
func (e *evaluator) batch(obj uint64, steps []step) (Value, error) {
	b := &batchEval{evaluator: e, steps: steps}
	var root Value
	cur := []*cursor{{obj: obj, out: &root, item: -1}}
	var failed error
	for k := 0; len(cur) > 0; {
		var next []*cursor
		if k == len(steps) {
			next = b.values(cur)
		} else {
			e.visits += len(cur) // one per object at each step, as eval counts
			switch s := steps[k]; {
			case s.all:
				next = b.all(cur, k)
			case s.attr != "":
				next = b.attrs(cur, k)
			case s.isKey:
				for _, c := range cur {
					c.obj, c.err = e.key(c.obj, s.key, b.where(c, k+1))
				}
				next = cur
			default:
				next = b.index(cur, k)
			}
		}
		if e.visits > maxVisits {
			return nil, errTooMany
		}
		// The item walk stops at the first item that fails: so does the
		// batch, at the first failed cursor in order (each level keeps the
		// order of the items). Nothing after it can change the outcome.
		live := next[:0]
		for _, c := range next {
			if c.err != nil {
				failed = c.err
				break
			}
			if !c.done {
				live = append(live, c)
			}
		}
		cur = live
		k = min(k+1, len(steps))
	}
	if failed != nil {
		return nil, failed
	}
	return root, nil
}

// cursor is one object a batched Eval has reached.
type cursor struct {
	obj  uint64
	out  *Value // where its value goes
	base string // the path up to the [*] (or list) that made this cursor
	item int    // its index there; -1 for the start
	from int    // the first step after that [*]
	nest int    // lists it is in, at the conversion (value's nest)
	done bool   // *out holds the value
	err  error
}

type batchEval struct {
	*evaluator
	steps []step
}

// where is the path a cursor has walked up to step k, as the item walk
// writes it in messages: reqs[3].rid.
func (b *batchEval) where(c *cursor, k int) string {
	w := c.base
	if c.item >= 0 {
		w += "[" + strconv.Itoa(c.item) + "]"
	}
	for _, s := range b.steps[c.from:k] {
		if w == "" && s.attr != "" {
			w = s.attr
		} else {
			w += s.text
		}
	}
	return w
}

// children makes a cursor for each item, in order, in place of c.
func (b *batchEval) children(c *cursor, items []uint64, base string, from int, next []*cursor) []*cursor {
	vals := make([]Value, len(items))
	*c.out = vals
	cs := make([]cursor, len(items))
	for j, it := range items {
		cs[j] = cursor{obj: it, out: &vals[j], base: base, item: j, from: from}
		next = append(next, &cs[j])
	}
	return next
}

// overflow says whether n more cursors would take the Eval past maxVisits;
// then it marks the Eval as past it, before anything is allocated for them.
func (b *batchEval) overflow(n int) bool {
	if b.visits+n > maxVisits {
		b.visits = maxVisits + 1
		return true
	}
	return false
}

// all expands [*]: a list's or tuple's items in two reads for every cursor
// (headers, item arrays); a dict's keys, and the rest, as e.items reads them.
func (b *batchEval) all(cur []*cursor, k int) []*cursor {
	items, fast := b.seqItems(cur)
	var next []*cursor
	for i, c := range cur {
		if !fast[i] {
			items[i], _, c.err = b.items(c.obj, b.where(c, k)+"[*]")
		}
		if c.err != nil {
			next = append(next, c)
			continue
		}
		if b.overflow(len(next) + len(items[i])) {
			return nil
		}
		next = b.children(c, items[i], b.where(c, k), k+1, next)
		if len(items[i]) == 0 {
			c.done = true
			next = append(next, c)
		}
	}
	return next
}

// index takes item [n] of each cursor's list or tuple. Like e.index it
// reads and checks every item pointer, not only the one it takes.
func (b *batchEval) index(cur []*cursor, k int) []*cursor {
	n := b.steps[k].index
	items, fast := b.seqItems(cur)
	for i, c := range cur {
		j := n
		if j < 0 {
			j += len(items[i])
		}
		if fast[i] && j >= 0 && j < len(items[i]) {
			c.obj = items[i][j]
			continue
		}
		c.obj, c.err = b.evaluator.index(c.obj, n, b.where(c, k+1))
	}
	return cur
}

// seqItems reads the items of every cursor that is an exact list or tuple
// with a plausible size: all headers in one read, all item arrays in the
// next. fast[i] is false where cursor i needs e.items (another type, a
// read that failed, a bad item pointer).
func (b *batchEval) seqItems(cur []*cursor) (items [][]uint64, fast []bool) {
	l := &b.p.layout
	hs := newSegs(len(cur))
	seg := make([]int, len(cur))
	for i, c := range cur {
		seg[i] = -1
		if validObj(c.obj) {
			seg[i] = hs.add(c.obj, int(max(l.ListItems, l.TupleSize))+8)
		}
	}
	b.p.run(hs)
	return b.readItems(hs, seg)
}

// readItems reads, in one read, the item arrays of the lists and tuples
// whose first bytes are segment heads[i] of hs (-1: not one). A tuple's
// items may already be there.
func (b *batchEval) readItems(hs *segs, heads []int) (items [][]uint64, fast []bool) {
	items, fast = make([][]uint64, len(heads)), make([]bool, len(heads))
	as := newSegs(0)
	seg := make([]int, len(heads))
	for i := range heads {
		seg[i] = -1
		if heads[i] < 0 {
			continue
		}
		h, err := hs.block(heads[i])
		if err != nil {
			continue
		}
		arr, n, ok := b.seqArray(h)
		switch {
		case !ok:
		case n == 0:
			fast[i] = true
		case arr >= h.addr && arr-h.addr+8*n <= uint64(len(h.b)):
			items[i], fast[i] = itemPtrs(h.b[arr-h.addr:], n)
		default:
			seg[i] = as.add(arr, int(8*n))
		}
	}
	if as.len() == 0 {
		return items, fast
	}
	b.p.run(as)
	for i := range seg {
		if seg[i] >= 0 {
			if raw, err := as.block(seg[i]); err == nil {
				items[i], fast[i] = itemPtrs(raw.b, uint64(len(raw.b)/8))
			}
		}
	}
	return items, fast
}

// seqArray is where an exact list's or tuple's item pointers are, from its
// header; ok is false for anything else.
func (b *batchEval) seqArray(h block) (arr, n uint64, ok bool) {
	p, l := b.p, &b.p.layout
	switch t := h.u64(8); {
	case len(h.b) < int(max(l.ListItems, l.TupleSize))+8:
		return 0, 0, false
	case t == p.types.list && t != 0:
		n, arr = h.u64(l.ListSize), h.u64(l.ListItems)
	case t == p.types.tuple && t != 0:
		n, arr = h.u64(l.TupleSize), h.addr+l.TupleItems
	default:
		return 0, 0, false
	}
	return arr, n, n <= maxItems
}

// itemPtrs decodes n item pointers; false if one is not an object pointer.
func itemPtrs(raw []byte, n uint64) ([]uint64, bool) {
	out := make([]uint64, n)
	blk := block{b: raw}
	for i := range out {
		if out[i] = blk.u64(8 * uint64(i)); !validObj(out[i]) {
			return nil, false
		}
	}
	return out, true
}

// values converts every cursor's object (the end of the path): each
// object's first headRead bytes in one read, which holds an int, a float or
// a short str whole; longer strs' text and lists' item arrays in the next;
// a list's items become cursors converted in the next round.
func (b *batchEval) values(cur []*cursor) []*cursor {
	r := b.readHeads(cur)
	if r == nil {
		return nil
	}
	// Second round: text of long strs, item arrays of lists.
	for i, c := range cur {
		b.valueHead(r, i, c)
	}
	b.p.run(r.ds)
	items, fast := b.readItems(r.hs, r.heads)
	return b.valueRest(r, cur, items, fast)
}

// valueRound is what values' rounds of reads keep for each cursor.
type valueRound struct {
	hs, ds *segs    // each object's head; a long str's text
	seg    []int    // the cursor's head segment in hs (-1: none)
	dseg   []int    // its text segment in ds (-1: none)
	heads  []int    // a list's or tuple's head segment in hs, for readItems (-1: none)
	kinds  []uint32 // a long str's kind
}

// readHeads reads the head of every cursor's object at once; None needs
// no read. nil: the batch visited more objects than it may.
func (b *batchEval) readHeads(cur []*cursor) *valueRound {
	p := b.p
	r := &valueRound{hs: newSegs(len(cur)), ds: newSegs(0), seg: make([]int, len(cur)),
		dseg: make([]int, len(cur)), heads: make([]int, len(cur)), kinds: make([]uint32, len(cur))}
	for i, c := range cur {
		r.seg[i], r.dseg[i], r.heads[i] = -1, -1, -1
		if c.obj == p.types.none && c.obj != 0 {
			*c.out, c.done = nil, true
			continue
		}
		if validObj(c.obj) {
			b.visits++
			r.seg[i] = r.hs.add(c.obj, headRead)
		}
	}
	if b.visits > maxVisits {
		return nil
	}
	p.run(r.hs)
	return r
}

// valueHead converts cursor i's object from its head where the head holds
// it (an int, a bool, a short str), asks for a long str's text or a list's
// items, or reads the object item by item.
func (b *batchEval) valueHead(r *valueRound, i int, c *cursor) {
	p := b.p
	if c.done {
		return
	}
	if r.seg[i] < 0 {
		*c.out, c.err = b.value(c.obj, b.where(c, len(b.steps)))
		c.done = true
		return
	}
	blk, err := r.hs.block(r.seg[i])
	if err != nil {
		b.visits-- // value counts it again
		*c.out, c.err = b.value(c.obj, b.where(c, len(b.steps)))
		c.done = true
		return
	}
	if err := checkHead(blk); err != nil {
		c.err, c.done = b.fail(b.where(c, len(b.steps)), "", err), true
		return
	}
	switch t := blk.u64(8); {
	case t == p.types.str:
		h, err := p.parseStrHead(blk.addr, blk)
		if err != nil {
			break
		}
		n := uint64(h.length) * uint64(h.kind)
		if end := h.dataAddr - blk.addr + n; end <= uint64(len(blk.b)) {
			*c.out, c.done = decodeKind(blk.b[h.dataAddr-blk.addr:end], h.kind), true
			return
		}
		r.kinds[i], r.dseg[i] = h.kind, r.ds.add(h.dataAddr, int(n))
		return
	case t == p.types.long, t == p.types.boolean:
		v, err := b.int(blk, "")
		if err != nil {
			break
		}
		if t == p.types.boolean {
			v = v != int64(0)
		}
		*c.out, c.done = v, true
		return
	case (t == p.types.list || t == p.types.tuple) && c.nest < maxNest:
		r.heads[i] = r.seg[i]
		return
	}
	b.nest = c.nest
	*c.out, c.err = b.valueFrom(blk, b.where(c, len(b.steps)))
	c.done, b.nest = true, 0
}

// valueRest finishes what valueHead began: long strs from their text,
// lists item by item where their items were not read fast, and a cursor
// for each item of the others (the next level). nil: too many cursors.
func (b *batchEval) valueRest(r *valueRound, cur []*cursor, items [][]uint64, fast []bool) []*cursor {
	var next []*cursor
	for i, c := range cur {
		switch {
		case c.done:
		case r.dseg[i] >= 0:
			raw, err := r.ds.block(r.dseg[i])
			if err == nil {
				*c.out, c.done = decodeKind(raw.b, r.kinds[i]), true
				continue
			}
			blk, _ := r.hs.block(r.seg[i])
			*c.out, c.err = b.valueFrom(blk, b.where(c, len(b.steps)))
			c.done = true
		case !fast[i]:
			b.nest = c.nest
			*c.out, c.err = b.list(c.obj, b.where(c, len(b.steps)))
			c.done, b.nest = true, 0
		default:
			if b.overflow(len(next) + len(items[i])) {
				return nil
			}
			n := len(next)
			next = b.children(c, items[i], b.where(c, len(b.steps)), len(b.steps), next)
			for _, ch := range next[n:] {
				ch.nest = c.nest + 1
			}
			if len(next) > n {
				continue
			}
			c.done = true
		}
		next = append(next, c)
	}
	return next
}
