// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// Reading what a Python stage call served, inside the watchpoint program, at
// the trap of the call's frame pop (docs/design.md, "Python: reads at the
// trap"). The thread that traps holds the GIL and is stopped inside the
// interpreter, so nothing reachable from its frames changes while this runs:
// the reads are consistent, which reads from user space after the fact
// cannot be.
//
// Where the arguments are at the pop:
//   3.11+  the dying frame sits just below the thread's data-stack top; its
//          locals were released without their slots being cleared, and the
//          objects the caller passed are still alive (the caller holds them).
//   3.10   frame_dealloc has cleared the slots, but the caller's value stack
//          still holds the callable and the arguments it passed (they are
//          popped after the call returns).
//
// User space compiles each object path of a spec (batch.reqs[*].rid) into a
// pyfield: a root (an argument, the return value, a local of the caller) and
// up to PY_MAX_STEPS steps (attribute, index, str key, every item). Every
// object read is bounded and checked (reference count, type), and every loop
// has a fixed bound, so forged memory gives an error code, never a hang.

// Named enums, not #defines, wherever Go needs the value: bpf2go generates
// them for the loader (-type in gen.go), so the two sides cannot disagree.
enum py_limit {
	PY_MAX_FIELDS = 8, // powers of two: indexes are masked, which the verifier can follow
	PY_MAX_STEPS = 8,
	PY_MAX_NAMES = 8,
	PY_NAME_LEN = 40,
	PY_MAX_ITEMS = 1024,
	PY_STR_MAX = 128,
	PY_MAX_MRO = 8,
	PY_MAX_PROBES = 16,
	PY_STACK_SCAN = 64,
	PY_BUF = 16384, // payload bytes per record; more go in continuation records
	PY_SLACK = 512, // room past PY_BUF for one item, so writes need one bound check
};

enum py_root { PY_ROOT_NONE, PY_ROOT_ARG, PY_ROOT_RETURN, PY_ROOT_CALLER };
enum py_op { PY_ATTR = 1, PY_INDEX, PY_KEY, PY_ITER, PY_ITER_SEQ, PY_LEN };
enum py_tag { PY_T_NONE, PY_T_INT, PY_T_STR, PY_T_BOOL, PY_T_OBJ };

// Why a field could not be read (pyerr in Go names them).
enum py_err {
	PY_OK,
	PY_E_READ,      // unreadable memory
	PY_E_FREED,     // the object's reference count is 0 (a temporary, gone)
	PY_E_TYPE,      // not what the step needs (an attribute of a str, say)
	PY_E_NOATTR,    // no such attribute
	PY_E_NOKEY,     // no such key
	PY_E_RANGE,     // index out of range
	PY_E_BIG,       // more items than PY_MAX_ITEMS, or too many probes
	PY_E_COMPUTED,  // a property: only Python code can compute it
	PY_E_UNSET,     // a slot or local with no value
	PY_E_NOFRAME,   // the call's frame (3.11+) or arguments (3.10) not found
	PY_E_NORETURN,  // no return value (returned a constant, or raised)
	PY_E_NOTINT,    // an int wider than 64 bits
	PY_E_KEYWORD,   // 3.10: not passed by position, and the call's keyword arguments cannot be found
	PY_E_NODEFAULT, // 3.10: not passed, and the function has no default for it
	PY_E_NOTTEMP,   // at a push: not a temporary (the pop reads it)
};

struct pylayout {
	// The thread state of the thread that trapped: it holds the GIL.
	u64 tstate_ptr;      // 3.10, 3.11: address of _PyRuntime.gilstate.tstate_current
	u64 gil_ptr;         // 3.12+: address of the interpreter's GIL pointer
	u64 gil_holder;      // offset of last_holder in the GIL
	u64 ts_native_tid;   // 0 where the thread state has none (3.10)
	u64 ts_datastack_top;
	u64 ts_frame;        // 3.10: tstate->frame
	u64 fr_code, fr_previous, fr_localsplus, fr_instr;
	u64 fr_valuestack, fr_lasti; // 3.10's PyFrameObject
	u64 co_code, co_stacksize, co_nlocals, co_consts; // 3.10's PyCodeObject
	u64 bytes_data;
	u64 tp_flags, tp_basicsize, tp_dictoffset, tp_mro, tp_dict, ht_cached_keys;
	u64 ascii_data, compact_data;
	u64 func_code, im_func, im_self;
	u64 func_defaults, func_kwdefaults; // 3.10: a parameter a call does not pass
	u64 md_def, mdef_type, mdef_offset;
	u64 t_list, t_tuple, t_dict, t_str, t_long, t_bool, t_function, t_method, t_member, t_cell, t_property, t_getset;
	u64 none;
	u64 ns_dev, ns_ino; // the target's PID namespace
	u8 minor;           // 10 .. 13
	u8 enabled;
	u8 long_tagged;     // 3.12+: an int's size and sign are in lv_tag
	u8 op_return, op_return_instr; // RETURN_VALUE, INSTRUMENTED_RETURN_VALUE (0: none)
	u8 op_call_function, op_call_method, op_call_kw, op_call_ex; // 3.10
	u8 op_extended_arg;
	u8 op_load_const; // 3.10: LOAD_CONST, which pushes a CALL_FUNCTION_KW's names
	// 3.11+, at a push: KW_NAMES (0: none), how many code units before the
	// CALL it sits (3.11: PRECALL and its cache between), and whether the
	// callable sits below its NULL-or-self (3.13) rather than above (3.11, 3.12).
	u8 op_kw_names, kw_back, self_above;
	u8 op_kw_call, op_kw_call_instr; // 3.13: CALL_KW, INSTRUMENTED_CALL_KW: names on the stack
	u64 co_nlocalsplus, fr_funcobj; // 3.11+
	// 3.11+: the opcodes that push a Python function's frame from the
	// caller's stack, [callable, self or NULL, args] (or NULL first), as a
	// bitmap: CALL and its specializations for Python functions.
	u8 callops[32];
};

struct pystep {
	u8 op;
	u8 name; // index in pyprog.names (PY_ATTR, PY_KEY)
	u16 pad;
	s32 index; // PY_INDEX
};

enum py_field_flag {
	PYF_LEN = 1,      // the value is the length of what the steps reach
	PYF_ITER_SEQ = 2, // steps[iter] walks a list or tuple, else takes the object itself
};

// 3.10: how a parameter can be passed (a keyword-only one has no position).
enum py_argkind { PYA_POS, PYA_POSONLY, PYA_KWONLY };

struct pyfield {
	u8 root;
	u8 cell;  // the slot holds a cell: the value is its content
	u16 slot; // 3.11+: localsplus index; 3.10: the parameter's index in co_varnames
	u8 nsteps;
	u8 iter;   // the step that walks every item, or PY_MAX_STEPS for none
	u8 maxstr; // bytes of a str copied at most (<= PY_STR_MAX)
	u8 flags;  // PYF_*
	u8 argkind; // 3.10: PYA_*
	u8 argname; // 3.10: the parameter's name in names (a **kwargs dict, keyword-only defaults)
	u16 pad;
	u32 pad2;
	u64 argstr; // 3.10: the parameter's name object, co_varnames[slot]: the keyword names a call passes are the same interned objects
	struct pystep steps[PY_MAX_STEPS];
};

struct pyname {
	u64 hash; // the str's hash as the target computes it
	u32 len;
	u32 pad;
	char s[PY_NAME_LEN];
};

struct pyprog {
	u32 nfields;
	u32 push;          // 3.11+: read arguments that are temporaries at the push (py_frame_push)
	u32 pad;
	u32 frame_bytes;   // 3.11+: the frame's size: it sits at datastack_top - frame_bytes
	u32 nlocalsplus;   // 3.11+: the return value is in the first stack slot
	u32 nargs;         // 3.10: positional parameters
	u64 caller_code;   // PY_ROOT_CALLER: the code the caller must run
	u64 func;          // 3.10: the function found at attach, for a call that shows none
	u64 owner;         // 3.10: the class it was found in (0: none), which a bound method's self is an instance of
	struct pyfield fields[PY_MAX_FIELDS];
	struct pyname names[PY_MAX_NAMES];
};

// Site -> what to read at the pop of its calls.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SITES);
	__type(key, u32);
	__type(value, struct pyprog);
} pyprogs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct pylayout);
} pylayouts SEC(".maps");

// Per-step attribute locations found during one trap: every item of a
// batch has the same type, so the lookup is made once.
enum py_cache { PY_C_NONE, PY_C_SHARED, PY_C_SLOT };

// 3.10: the arguments of the returning call, as its caller's stack holds them.
struct pycall {
	u64 self;    // prepended by a bound method (0: none)
	u64 func;    // the function object: its defaults
	u64 postup;  // CALL_FUNCTION_EX: the tuple of positional arguments (0: on the stack)
	u64 kwnames; // CALL_FUNCTION_KW: the keyword names, their values from slots[kwbase]
	u64 kwdict;  // CALL_FUNCTION_EX: the keyword arguments' dict
	u32 npos;    // positional arguments passed, self counted
	u32 posbase; // slots[posbase]: the first positional argument after self
	u32 kwbase;
	u32 nkw;
	u32 known;   // 0: only self is known (the rest are not found)
	u32 pad;
};

// A dict keys table being probed (py_keys_lookup).
struct pylookup {
	u64 keys, indices, entries, nentries, mask, perturb, i;
	u32 ixsize, esize, unicode, pad;
};

struct pyscratch {
	u64 ts, frame, caller, code;
	struct pycall call;
	u32 site;
	u32 push;  // reading at a push (py_frame_push), not at a pop
	u32 roots; // at a push: temporaries found (fields read)
	u32 wake;  // the hit, sent without its values, wakes the reader at once
	u32 off;   // bytes written in buf (the record header included)
	u32 field; // the field being read
	u32 first; // its first step after PY_ITER
	u32 last;  // its step count
	u64 items; // what PY_ITER walks: a list's or tuple's items, a dict's entries
	u32 ikind; // 0: items; 1: entries {hash, key, value}; 2: entries {key, value}; 3: the object itself
	u32 nitems;
	u32 count; // items written
	u32 seq;   // records sent for this trap
	u8 err, err_step;
	u16 err_item;
	u64 err_detail;
	u64 lastval; // the value of the entry py_keys_lookup found
	u64 ctype[PY_MAX_STEPS];
	s64 cval[PY_MAX_STEPS];
	u8 ckind[PY_MAX_STEPS];
	u8 pad[2];
	u64 keyptr[PY_MAX_NAMES]; // name objects matched in this trap
	u64 keys[5];              // a dict keys table's header (py_keys_lookup)
	u64 ix;                   // one of its indices
	u64 entry[3];             // one of its entries (py_entry_is)
	struct pylookup lookup;
	u64 obj[6];               // a list's, tuple's or dict's header (py_iter)
	u8 str[136];              // a str's header and text (py_str_is)
	u64 slots[PY_STACK_SCAN]; // 3.10: the caller's value stack
	u64 kwn[PY_STACK_SCAN];   // 3.10: a call's keyword names
	u64 head[32];             // an object's first bytes, read at once (py_out_value, py_attr)
	u64 chunk[16];            // the item pointers of a PY_ITER, read 16 at a time
	u64 chunk_at;             // the first item chunk holds, +1 (0: none)
	u64 cflags[PY_MAX_STEPS]; // with ctype: the type's tp_flags and tp_basicsize
	u64 cbasic[PY_MAX_STEPS];
	u8 buf[PY_BUF + PY_SLACK];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct pyscratch);
} pyscratches SEC(".maps");

const struct pyprog *unused_pyprog __attribute__((unused));
const struct pylayout *unused_pylayout __attribute__((unused));
// The enums Go takes from the generated bindings must be in the BTF.
const enum py_limit *unused_py_limit __attribute__((unused));
const enum py_root *unused_py_root __attribute__((unused));
const enum py_op *unused_py_op __attribute__((unused));
const enum py_tag *unused_py_tag __attribute__((unused));
const enum py_err *unused_py_err __attribute__((unused));
const enum py_field_flag *unused_py_field_flag __attribute__((unused));
const enum py_argkind *unused_py_argkind __attribute__((unused));

// ---- reading ------------------------------------------------------------

// idx masks an index in a way the compiler cannot drop (it would, after a
// bound check of its own, and the verifier then sees an unbounded index).
static __always_inline u32 idx(u32 i, const u32 mask)
{
	asm volatile("%[i] &= %[m]" : [i] "+r"(i) : [m] "i"(mask));
	return i;
}

// nbytes is the size of a read of n items of size bytes, 1 <= n <= max
// (a power of 2): a bound the verifier sees in the register that holds it.
// Kernels before 6.8 lose a bound checked on a register the compiler had
// already spilled, and refuse the read ("R2 unbounded memory access").
static __always_inline u32 nbytes(u32 n, const u32 max, const u32 size)
{
	return (idx(n - 1, max - 1) + 1) * size;
}

static __always_inline struct pyscratch *scratch(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&pyscratches, &zero);
}

static __always_inline struct pylayout *layout(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&pylayouts, &zero);
}

static __always_inline u64 rd64(u64 addr, int *bad)
{
	u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		*bad = 1;
	return v;
}

// A pointer that could be a live object's: canonical user space, aligned.
static __always_inline int objptr(u64 p)
{
	return p >= 0x1000 && p < 0x0000800000000000ULL && (p & 7) == 0;
}

static __always_inline int fail(struct pyscratch *s, u8 err, u64 detail)
{
	if (s->err == PY_OK) {
		s->err = err;
		s->err_detail = detail;
	}
	return -1;
}

// obj_type checks obj is a live object and returns its type.
static __always_inline u64 obj_type(struct pyscratch *s, u64 obj)
{
	u64 hdr[2];
	if (!objptr(obj)) {
		fail(s, PY_E_READ, obj);
		return 0;
	}
	if (bpf_probe_read_user(hdr, sizeof(hdr), (void *)obj)) {
		fail(s, PY_E_READ, obj);
		return 0;
	}
	if ((s64)hdr[0] <= 0) {
		fail(s, PY_E_FREED, obj);
		return 0;
	}
	if (!objptr(hdr[1])) {
		fail(s, PY_E_READ, hdr[1]);
		return 0;
	}
	return hdr[1];
}

static __always_inline u64 type_flags(struct pylayout *L, u64 t, int *bad)
{
	return rd64(t + L->tp_flags, bad);
}

#define TPF_INLINE_VALUES (1ULL << 2)
#define TPF_MANAGED_DICT (1ULL << 4)
#define TPF_LONG_SUBCLASS (1ULL << 24)
#define TPF_LIST_SUBCLASS (1ULL << 25)
#define TPF_TUPLE_SUBCLASS (1ULL << 26)
#define TPF_UNICODE_SUBCLASS (1ULL << 28)
#define TPF_DICT_SUBCLASS (1ULL << 29)


static __always_inline struct pyprog *prog_of(u32 site)
{
	return bpf_map_lookup_elem(&pyprogs, &site);
}

// ---- output -------------------------------------------------------------
//
// A trap's payload is a stream of fields, each
//   PY_F_BEGIN index (PY_F_LIST)? value* (PY_F_END | PY_F_ERR err step item:u16 detail:u64)
// and each value a tag and its bytes: INT i64, STR kind:u8 n:u16 bytes, BOOL u8,
// OBJ type:u64, NONE. It is cut into records of up to PY_BUF bytes (the
// record header first in each); user space joins them by seq.

enum py_mark { PY_F_BEGIN = 0xf0, PY_F_END, PY_F_ERR, PY_F_LIST, PY_F_ROOT };
const enum py_mark *unused_py_mark __attribute__((unused));

// Writes go to buf at their offset masked to PY_BUF: a no-op for the
// offsets the bound checks let through, and what tells the verifier every
// write stays inside the buffer (with PY_SLACK past it for the last item).
#define BUF_AT(s, o) (&(s)->buf[(o) & (PY_BUF - 1)])

#define DEFINE_OUT(name, T)                                         \
	static __always_inline void name(struct pyscratch *s, T v)  \
	{                                                           \
		u32 o = s->off;                                     \
		if (o >= PY_BUF)                                    \
			return;                                     \
		__builtin_memcpy(BUF_AT(s, o), &v, sizeof(v));      \
		s->off = o + sizeof(v);                             \
	}
DEFINE_OUT(out_u8, u8)
DEFINE_OUT(out_u16, u16)
DEFINE_OUT(out_u64, u64)

// py_flush sends what buf holds as one record and starts the next; last
// marks the trap's final record. A record lost to a full ring leaves a gap
// in seq: user space then drops the trap's payload, never a part of it.
static __always_inline void py_flush(struct pyscratch *s, int last)
{
	struct watch_event *h = (struct watch_event *)s->buf;
	u32 n = s->off;
	if (n > sizeof(s->buf))
		n = sizeof(s->buf);
	if (n < sizeof(*h))
		return;
	h->len = n - sizeof(*h);
	h->seq = s->seq;
	h->last = last;
	u64 before = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	u64 wake = before < wakeup_bytes && before + n + 8 >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&events, s->buf, n, wake))
		count_drop();
	s->seq++;
	h->kind = KIND_PYDATA;
	s->off = sizeof(*h);
}

// Before an item that could fill the record, send it on.
static __always_inline void py_room(struct pyscratch *s)
{
	if (s->off > PY_BUF - (PY_STR_MAX + 32))
		py_flush(s, 0);
}

// ---- values -------------------------------------------------------------

// py_head reads an object's first bytes into s->head: 128, or fewer when
// the object ends just before an unmapped page. It returns how many.
static __always_inline u32 py_head(struct pyscratch *s, u64 obj)
{
	if (!bpf_probe_read_user(s->head, 128, (void *)obj))
		return 128;
	if (!bpf_probe_read_user(s->head, 48, (void *)obj))
		return 48;
	if (!bpf_probe_read_user(s->head, 16, (void *)obj))
		return 16;
	return 0;
}

// py_out_str copies a compact str, its header in s->head (got bytes of
// it): its kind (bytes per character) and data.
static __always_inline int py_out_str(struct pylayout *L, struct pyscratch *s, struct pyprog *p, u64 obj, u32 got)
{
	if (got < 48)
		return fail(s, PY_E_READ, obj);
	u32 state = (u32)s->head[4];
	u32 kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || (kind != 1 && kind != 2 && kind != 4))
		return fail(s, PY_E_TYPE, obj);
	u64 n = s->head[2] * kind;
	u32 maxstr = p->fields[idx(s->field, PY_MAX_FIELDS - 1)].maxstr;
	if (maxstr > PY_STR_MAX)
		maxstr = PY_STR_MAX;
	if (n > maxstr)
		return fail(s, PY_E_BIG, n);
	u32 d = ascii ? L->ascii_data : L->compact_data;
	if (d > 0x48)
		return fail(s, PY_E_TYPE, obj);
	u32 o = s->off;
	if (o >= PY_BUF)
		return fail(s, PY_E_BIG, o);
	u8 *b = BUF_AT(s, o);
	b[0] = PY_T_STR;
	b[1] = kind;
	u16 n16 = n;
	__builtin_memcpy(b + 2, &n16, 2);
	n = idx(n, 2 * PY_STR_MAX - 1);
	if (n > 0) {
		// From the bytes already read when they hold the text.
		int r = d + n <= got ? bpf_probe_read_kernel(b + 4, n, (u8 *)s->head + d)
				     : bpf_probe_read_user(b + 4, n, (void *)(obj + d));
		if (r)
			return fail(s, PY_E_READ, obj + d);
	}
	s->off = o + 4 + n;
	return 0;
}

// py_out_int writes an int (or an int subclass: IntEnum) that fits 64
// bits, its header and digits in s->head.
static __always_inline int py_out_int(struct pylayout *L, struct pyscratch *s, u64 obj, u32 got, int boolean)
{
	if (got < 48)
		return fail(s, PY_E_READ, obj);
	u64 n;
	int neg = 0;
	if (L->long_tagged) {
		u64 tag = s->head[2];
		if ((tag & 3) == 3)
			return fail(s, PY_E_TYPE, obj);
		neg = (tag & 3) == 2;
		n = (tag & 3) == 1 ? 0 : tag >> 3;
	} else {
		s64 size = (s64)s->head[2];
		neg = size < 0;
		n = neg ? -size : size;
	}
	u32 *d = (u32 *)&s->head[3];
	u64 mag = 0;
	if (n > 3 || (n == 3 && d[2] >= 16))
		return fail(s, PY_E_NOTINT, obj);
	if (n >= 1)
		mag = d[0] & 0x3fffffff;
	if (n >= 2)
		mag |= (u64)(d[1] & 0x3fffffff) << 30;
	if (n >= 3)
		mag |= (u64)d[2] << 60;
	s64 v = neg ? -(s64)mag : (s64)mag;
	if (boolean) {
		out_u8(s, PY_T_BOOL);
		out_u8(s, v != 0);
	} else {
		out_u8(s, PY_T_INT);
		out_u64(s, v);
	}
	return 0;
}

// py_out_value writes obj as the value it is: None, bool, int, str, or an
// object's type; with len, its length (list, tuple, dict).
__noinline int py_out_value(u64 obj, int len)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L)
		return -1;
	struct pyprog *p = prog_of(s->site);
	if (!p)
		return -1;
	if (!len && obj == L->none && obj) {
		out_u8(s, PY_T_NONE);
		return 0;
	}
	// One read: the header, and a str's text or an int's digits with it.
	if (!objptr(obj))
		return fail(s, PY_E_READ, obj);
	u32 got = py_head(s, obj);
	if (!got)
		return fail(s, PY_E_READ, obj);
	if ((s64)s->head[0] <= 0)
		return fail(s, PY_E_FREED, obj);
	u64 t = s->head[1];
	if (!objptr(t))
		return fail(s, PY_E_READ, t);
	int bad = 0;
	u64 flags = 0;
	if (t != L->t_str && t != L->t_long && t != L->t_list && t != L->t_tuple && t != L->t_dict)
		flags = type_flags(L, t, &bad);
	if (bad)
		return fail(s, PY_E_READ, t);
	if (len) {
		u64 n;
		if (t == L->t_dict || flags & TPF_DICT_SUBCLASS || t == L->t_list || t == L->t_tuple ||
		    flags & (TPF_LIST_SUBCLASS | TPF_TUPLE_SUBCLASS))
			n = s->head[2]; // ma_used, ob_size
		else
			return fail(s, PY_E_TYPE, t);
		out_u8(s, PY_T_INT);
		out_u64(s, n);
		return 0;
	}
	if (t == L->t_str || flags & TPF_UNICODE_SUBCLASS)
		return py_out_str(L, s, p, obj, got);
	if (t == L->t_bool)
		return py_out_int(L, s, obj, got, 1);
	if (t == L->t_long || flags & TPF_LONG_SUBCLASS)
		return py_out_int(L, s, obj, got, 0);
	out_u8(s, PY_T_OBJ);
	out_u64(s, t);
	return 0;
}

// ---- dict lookups -------------------------------------------------------

// py_str_is tells whether the str at key equals name (hash, length, bytes).
static __always_inline int py_str_is(struct pylayout *L, struct pyscratch *s, u64 key, struct pyname *name)
{
	// A compact ASCII str's header and the name's bytes, in the scratch
	// (the stack of the call chain that gets here has no room). Zeroed, so
	// that past the str's length it matches the name's zero padding.
	u8 *b = s->str;
	__builtin_memset(b, 0, sizeof(s->str));
	u32 d = L->ascii_data, len = name->len;
	if (d > 0x30 || len > PY_NAME_LEN)
		return 0;
	u32 n = idx(d + len, 127);
	if (n == 0 || bpf_probe_read_user(b, n, (void *)key))
		return 0;
	u64 length = *(u64 *)&b[0x10], hash = *(u64 *)&b[0x18];
	u32 state = *(u32 *)&b[0x20];
	if (length != len || !((state >> 5) & 1) || !((state >> 6) & 1) || hash != name->hash)
		return 0;
	for (int w = 0; w < PY_NAME_LEN / 8; w++) {
		u64 x, y;
		__builtin_memcpy(&x, &b[idx(d + 8 * w, 127)], 8);
		__builtin_memcpy(&y, &name->s[8 * w], 8);
		if (x != y)
			return 0;
	}
	return 1;
}

// py_entry_is tells whether the dict entry at e has the key name nm: 1 yes
// (its value then in s->lastval), 0 no, -1 unreadable.
__noinline int py_entry_is(u64 e, u32 unicode, u32 nm)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L)
		return -1;
	struct pyprog *p = prog_of(s->site);
	if (!p)
		return -1;
	struct pyname *name = &p->names[idx(nm, PY_MAX_NAMES - 1)];
	u64 *w = s->entry;
	w[2] = 0;
	if (bpf_probe_read_user(w, unicode ? 16 : 24, (void *)e)) {
		fail(s, PY_E_READ, e);
		return -1;
	}
	u64 key = unicode ? w[0] : w[1];
	u64 val = unicode ? w[1] : w[2];
	if (!key)
		return 0;
	if (key == s->keyptr[idx(nm, PY_MAX_NAMES - 1)]) {
		s->lastval = val;
		return 1;
	}
	if ((unicode || w[0] == name->hash) && py_str_is(L, s, key, name)) {
		s->keyptr[idx(nm, PY_MAX_NAMES - 1)] = key;
		s->lastval = val;
		return 1;
	}
	return 0;
}

// py_keys_lookup finds name in a dict keys table: the entry's index (its
// value in s->lastval), -1 when absent, -2 when the table could not be read.
// The probe sequence is CPython's (lookdict): i = hash & mask, then
// i = i*5 + perturb + 1 with perturb >>= 5.
__noinline long py_keys_lookup(u64 keys, u32 nm)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L || nm >= PY_MAX_NAMES)
		return -2;
	struct pyprog *p = prog_of(s->site);
	if (!p)
		return -2;
	struct pyname *name = &p->names[idx(nm, PY_MAX_NAMES - 1)];
	u64 *h = s->keys;
	if (!objptr(keys) || bpf_probe_read_user(h, sizeof(s->keys), (void *)keys)) {
		fail(s, PY_E_READ, keys);
		return -2;
	}
	// The probe's state lives in the scratch: kept on the stack across
	// py_entry_is, it took more of the chain's 512 bytes than it has.
	struct pylookup *k = &s->lookup;
	u64 size;
	k->esize = 24;
	k->unicode = 0;
	if (L->minor == 10) {
		size = h[1];
		k->nentries = h[4];
		k->indices = keys + 0x28;
	} else {
		u8 log2 = h[1] & 0xff, log2ix = (h[1] >> 8) & 0xff, kind = (h[1] >> 16) & 0xff;
		if (log2 > 40 || log2ix > 44) {
			fail(s, PY_E_READ, keys);
			return -2;
		}
		size = 1ULL << log2;
		k->nentries = h[3];
		k->indices = keys + 0x20;
		k->entries = k->indices + (1ULL << log2ix);
		k->unicode = kind != 0;
		k->esize = kind ? 16 : 24;
	}
	if (size == 0 || size > (1ULL << 40) || (size & (size - 1)) || k->nentries > size) {
		fail(s, PY_E_READ, keys);
		return -2;
	}
	k->ixsize = size <= 0x80 ? 1 : size <= 0x8000 ? 2 : size <= 0x80000000ULL ? 4 : 8;
	if (L->minor == 10)
		k->entries = k->indices + size * k->ixsize;
	k->keys = keys;
	k->mask = size - 1;
	k->perturb = name->hash;
	k->i = name->hash & k->mask;
	for (int probe = 0; probe < PY_MAX_PROBES; probe++) {
		// Eight bytes read whatever the index size (the entries follow the
		// indices), then cut to it with its sign.
		u64 at = k->indices + k->i * k->ixsize;
		s->ix = 0;
		if (bpf_probe_read_user(&s->ix, sizeof(s->ix), (void *)at)) {
			fail(s, PY_E_READ, at);
			return -2;
		}
		u32 shift = 64 - 8 * k->ixsize;
		s64 ix = (s64)(s->ix << shift) >> shift;
		if (ix == -1)
			return -1; // DKIX_EMPTY: not in the table
		if (ix >= 0 && (u64)ix < k->nentries) {
			int r = py_entry_is(k->entries + ix * k->esize, k->unicode, nm);
			if (r < 0)
				return -2;
			if (r)
				return ix;
		}
		k->perturb >>= 5;
		k->i = (k->i * 5 + k->perturb + 1) & k->mask;
	}
	fail(s, PY_E_BIG, k->keys);
	return -2;
}

// ---- attributes ---------------------------------------------------------

// py_values_at reads slot ix of an instance's values array (split dicts and
// managed dicts); 3.13's arrays say their capacity first.
static __always_inline u64 py_values_at(struct pylayout *L, u64 values, s64 ix, int *bad)
{
	if (ix < 0 || ix >= 1 << 20) {
		*bad = 1;
		return 0;
	}
	if (L->minor >= 13) {
		u8 cap = 0;
		if (bpf_probe_read_user(&cap, 1, (void *)values)) {
			*bad = 1;
			return 0;
		}
		if (ix >= cap)
			return 0; // added to the shared keys after these values were made
		return rd64(values + 8 + 8 * ix, bad);
	}
	return rd64(values + 8 * ix, bad);
}

// py_instance_store finds where an instance keeps its attributes: a values
// array indexed through its class's shared keys (3.11+ managed dicts), or a
// dict (3.10, classes with a __dict__ slot).
static __always_inline void py_instance_store(struct pylayout *L, u64 obj, u64 t, u64 flags, u64 *values, u64 *dict, int *bad)
{
	*values = 0;
	*dict = 0;
	if (L->minor >= 11 && flags & TPF_MANAGED_DICT) {
		u64 pre[2] = {};
		if (bpf_probe_read_user(pre, sizeof(pre), (void *)(obj - 0x20))) {
			*bad = 1;
			return;
		}
		if (L->minor == 11) {
			*values = pre[0];
			*dict = pre[1];
		} else if (L->minor == 12) {
			if (pre[1] & 1)
				*values = pre[1] + 1;
			else
				*dict = pre[1];
		} else {
			*dict = pre[1];
			if (!*dict && flags & TPF_INLINE_VALUES) {
				u64 bs = rd64(t + L->tp_basicsize, bad);
				u8 h[4] = {};
				if (bs < 0x10 || bs > 1 << 20 || bpf_probe_read_user(h, 4, (void *)(obj + bs))) {
					*bad = 1;
					return;
				}
				if (h[3]) // valid: no dict took them over
					*values = obj + bs;
			}
		}
		return;
	}
	s64 off = rd64(t + L->tp_dictoffset, bad);
	if (off > 0 && off < 1 << 20)
		*dict = rd64(obj + off, bad);
}

// py_dict_get looks name up in a dict object (its keys, and its values
// array when the dict is split).
static __always_inline u64 py_dict_get(struct pylayout *L, struct pyscratch *s, u64 dict, u32 nm, long *ix)
{
	int bad = 0;
	u64 hk[2];
	if (bpf_probe_read_user(hk, sizeof(hk), (void *)(dict + 0x20))) {
		fail(s, PY_E_READ, dict);
		*ix = -2;
		return 0;
	}
	*ix = py_keys_lookup(hk[0], nm);
	if (*ix < 0)
		return 0;
	if (!hk[1])
		return s->lastval;
	u64 v = py_values_at(L, hk[1], *ix, &bad);
	if (bad) {
		fail(s, PY_E_READ, hk[1]);
		*ix = -2;
	}
	return v;
}

#define T_OBJECT 6

// py_attr_cached reads obj's attribute at step k where s->ctype[k] says it
// is: 0 when obj is not of that type (or keeps this one elsewhere), then
// found the long way.
static __always_inline u64 py_attr_cached(struct pylayout *L, struct pyscratch *s, u64 obj, u32 k)
{
	u64 *h = s->head; // [obj-0x20, obj+0x60)
	if (bpf_probe_read_user(h, 128, (void *)(obj - 0x20)))
		return 0;
	if ((s64)h[4] <= 0 || h[5] != s->ctype[k])
		return 0;
	s64 c = s->cval[k];
	int bad = 0;
	u64 v = 0;
	if (s->ckind[k] == PY_C_SLOT) {
		if (c >= 0x10 && c <= 0x58 && !(c & 7))
			v = h[idx((0x20 + c) / 8, 15)];
		else
			v = rd64(obj + c, &bad);
		if (bad)
			fail(s, PY_E_READ, obj);
		else if (!v)
			fail(s, PY_E_UNSET, obj);
		return v;
	}
	if (s->ckind[k] != PY_C_SHARED || c < 0 || c >= 1 << 20 || !(s->cflags[k] & TPF_MANAGED_DICT))
		return 0;
	u64 values = 0;
	switch (L->minor) {
	case 11:
		if (!h[1])
			values = h[0];
		break;
	case 12:
		if (h[1] & 1)
			values = h[1] + 1;
		break;
	default:
		if (!h[1] && s->cflags[k] & TPF_INLINE_VALUES) {
			u64 bs = s->cbasic[k];
			// capacity and valid bytes, then values[c], inside what was read?
			u64 at = 0x20 + bs, slot = at + 8 + 8 * c;
			if (bs >= 0x10 && slot + 8 <= 128) {
				u8 *hb = (u8 *)h;
				u8 cap = hb[idx(at, 127)], valid = hb[idx(at + 3, 127)];
				if (!valid || c >= cap)
					return 0;
				return h[idx(slot / 8, 15)];
			}
			values = obj + bs;
		}
	}
	if (!values)
		return 0; // a dict of its own: the long way
	return py_values_at(L, values, c, &bad);
}

// py_attr resolves obj.name (the name of the field's step): the instance's
// own attributes, then its class's along the MRO (a __slots__ member read
// from the object, a plain class attribute as it is; properties refused).
// Where the location does not depend on the instance (a shared-keys index, a
// slot offset) it is kept for the step: a batch's items share their type.
static __always_inline u64 py_attr(u64 obj, u32 step)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L || step >= PY_MAX_STEPS)
		return 0;
	struct pyprog *p = prog_of(s->site);
	u32 f = s->field;
	if (!p || f >= PY_MAX_FIELDS)
		return 0;
	u32 nm = p->fields[idx(f, PY_MAX_FIELDS - 1)].steps[idx(step, PY_MAX_STEPS - 1)].name;
	if (nm >= PY_MAX_NAMES)
		return 0;
	if (!objptr(obj)) {
		fail(s, PY_E_READ, obj);
		return 0;
	}
	u32 k = idx(step, PY_MAX_STEPS - 1);
	if (s->ctype[k]) {
		// A batch's next item: where the attribute is was found on the
		// first, and one read of the object (with the managed-dict words
		// before it and the values after it) is usually all it takes.
		u64 v = py_attr_cached(L, s, obj, k);
		if (v)
			return v;
		if (s->err != PY_OK)
			return 0;
	}
	u64 t = obj_type(s, obj);
	if (!t)
		return 0;
	int bad = 0;
	u64 v = 0;
	u64 flags = type_flags(L, t, &bad);
	u64 values, dict;
	py_instance_store(L, obj, t, flags, &values, &dict, &bad);
	if (bad) {
		fail(s, PY_E_READ, obj);
		return 0;
	}
	if (values) {
		s64 ix;
		{
			u64 keys = rd64(t + L->ht_cached_keys, &bad);
			ix = bad ? -2 : py_keys_lookup(keys, nm);
			if (ix >= 0) {
				s->ctype[k] = t;
				s->ckind[k] = PY_C_SHARED;
				s->cval[k] = ix;
				s->cflags[k] = flags;
				s->cbasic[k] = rd64(t + L->tp_basicsize, &bad);
			}
		}
		if (ix >= 0) {
			v = py_values_at(L, values, ix, &bad);
			if (bad) {
				fail(s, PY_E_READ, values);
				return 0;
			}
			if (v)
				return v;
		}
		if (ix == -2)
			return 0;
	} else if (dict) {
		long ix;
		v = py_dict_get(L, s, dict, nm, &ix);
		if (v)
			return v;
		if (ix == -2)
			return 0;
	}
	// The class and its bases.
	u64 mro = rd64(t + L->tp_mro, &bad);
	u64 n = mro && !bad ? rd64(mro + 0x10, &bad) : 0;
	if (bad) {
		fail(s, PY_E_READ, t);
		return 0;
	}
	for (int i = 0; i < PY_MAX_MRO; i++) {
		if (i >= n)
			break;
		u64 c = rd64(mro + 0x18 + 8 * i, &bad);
		u64 cd = c && !bad ? rd64(c + L->tp_dict, &bad) : 0;
		if (bad) {
			fail(s, PY_E_READ, mro);
			return 0;
		}
		if (!cd)
			continue;
		long ix;
		u64 cv = py_dict_get(L, s, cd, nm, &ix);
		if (ix == -2)
			return 0;
		if (ix < 0 || !cv)
			continue;
		u64 vt = rd64(cv + 8, &bad);
		if (bad) {
			fail(s, PY_E_READ, cv);
			return 0;
		}
		if (vt == L->t_member && vt) {
			u64 def = rd64(cv + L->md_def, &bad);
			u32 typ = def && !bad ? (u32)rd64(def + L->mdef_type, &bad) : 0;
			s64 off = def && !bad ? rd64(def + L->mdef_offset, &bad) : 0;
			if (bad || off < 0x10 || off >= 1 << 20) {
				fail(s, PY_E_READ, def);
				return 0;
			}
			v = rd64(obj + off, &bad);
			if (bad) {
				fail(s, PY_E_READ, obj);
				return 0;
			}
			s->ctype[idx(step, PY_MAX_STEPS - 1)] = t;
			s->ckind[idx(step, PY_MAX_STEPS - 1)] = PY_C_SLOT;
			s->cval[idx(step, PY_MAX_STEPS - 1)] = off;
			if (!v && typ == T_OBJECT && L->none)
				return L->none;
			if (!v)
				fail(s, PY_E_UNSET, obj);
			return v;
		}
		if ((vt == L->t_property && vt) || (vt == L->t_getset && vt)) {
			fail(s, PY_E_COMPUTED, vt);
			return 0;
		}
		return cv; // a class attribute
	}
	fail(s, PY_E_NOATTR, t);
	return 0;
}

// py_item returns item i of a list or tuple (negative from the end).
static __always_inline u64 py_item(struct pylayout *L, struct pyscratch *s, u64 obj, s64 i)
{
	u64 t = obj_type(s, obj);
	if (!t)
		return 0;
	int bad = 0;
	u64 flags = t == L->t_list || t == L->t_tuple ? 0 : type_flags(L, t, &bad);
	u64 n = rd64(obj + 0x10, &bad);
	u64 base;
	if (t == L->t_list || flags & TPF_LIST_SUBCLASS)
		base = rd64(obj + 0x18, &bad);
	else if (t == L->t_tuple || flags & TPF_TUPLE_SUBCLASS)
		base = obj + 0x18;
	else {
		fail(s, PY_E_TYPE, t);
		return 0;
	}
	if (bad) {
		fail(s, PY_E_READ, obj);
		return 0;
	}
	if (i < 0)
		i += n;
	if (i < 0 || (u64)i >= n) {
		fail(s, PY_E_RANGE, n);
		return 0;
	}
	u64 v = rd64(base + 8 * i, &bad);
	if (bad)
		fail(s, PY_E_READ, base);
	return v;
}

// py_step applies the field's step j to obj.
__noinline u64 py_step(u64 obj, u32 j)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L)
		return 0;
	struct pyprog *p = prog_of(s->site);
	u32 f = s->field;
	if (!p || f >= PY_MAX_FIELDS)
		return 0;
	struct pystep *st = &p->fields[idx(f, PY_MAX_FIELDS - 1)].steps[idx(j, PY_MAX_STEPS - 1)];
	s->err_step = j;
	switch (st->op) {
	case PY_ATTR:
		return py_attr(obj, j);
	case PY_INDEX:
		return py_item(L, s, obj, st->index);
	case PY_KEY: {
		u64 t = obj_type(s, obj);
		int bad = 0;
		if (!t)
			return 0;
		u64 flags = t == L->t_dict ? 0 : type_flags(L, t, &bad);
		if (bad || !(t == L->t_dict || flags & TPF_DICT_SUBCLASS)) {
			fail(s, PY_E_TYPE, t);
			return 0;
		}
		long ix;
		obj = py_dict_get(L, s, obj, st->name, &ix);
		if (ix == -1)
			fail(s, PY_E_NOKEY, 0);
		return obj;
	}
	case PY_LEN:
		return obj; // the terminal takes the length
	}
	fail(s, PY_E_TYPE, st->op);
	return 0;
}

// py_steps applies the field's steps [from, to) to obj.
static __always_inline u64 py_steps(u64 obj, u32 from, u32 to)
{
	for (u32 j = 0; j < PY_MAX_STEPS; j++) {
		if (j < from)
			continue;
		if (j >= to || !obj)
			break;
		obj = py_step(obj, j);
	}
	return obj;
}

// ---- every item ---------------------------------------------------------

// py_terminal writes the field's value for obj: its length when the last
// step is PY_LEN.
static __always_inline int py_terminal(struct pyprog *p, u32 f, u64 obj)
{
	return py_out_value(obj, p->fields[idx(f, PY_MAX_FIELDS - 1)].flags & PYF_LEN);
}

static long py_item_cb(u64 i, void *unused)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L)
		return 1;
	struct pyprog *p = prog_of(s->site);
	u32 f = s->field;
	if (!p || f >= PY_MAX_FIELDS)
		return 1;
	int bad = 0;
	u64 obj;
	switch (s->ikind) {
	case 0:
		// Sixteen item pointers a read.
		if (s->chunk_at != (i & ~15ULL) + 1) {
			u64 left = s->nitems - (i & ~15ULL);
			u32 n = left < 16 ? left : 16;
			if (bpf_probe_read_user(s->chunk, nbytes(n, 16, 8), (void *)(s->items + 8 * (i & ~15ULL))))
				bad = 1;
			s->chunk_at = (i & ~15ULL) + 1;
		}
		obj = s->chunk[idx(i, 15)];
		break;
	case 3:
		obj = s->items;
		break;
	default: {
		u64 e[3] = {};
		u32 esize = s->ikind == 1 ? 24 : 16;
		if (bpf_probe_read_user(e, esize == 16 ? 16 : 24, (void *)(s->items + i * esize))) {
			bad = 1;
			break;
		}
		u64 key = s->ikind == 1 ? e[1] : e[0], val = s->ikind == 1 ? e[2] : e[1];
		if (!key || !val)
			return 0; // a deleted entry
		obj = key;
	}
	}
	if (bad) {
		fail(s, PY_E_READ, s->items);
		s->err_item = i;
		return 1;
	}
	py_room(s);
	obj = py_steps(obj, s->first, s->last);
	if (!obj || py_terminal(p, f, obj)) {
		s->err_item = i;
		if (s->err == PY_OK)
			fail(s, PY_E_READ, obj);
		return 1;
	}
	s->count++;
	return 0;
}

// py_iter sets up the walk over obj's items (a list's or tuple's, a dict's
// keys); with seq_only, an object that is neither is the one item.
static __always_inline int py_iter(struct pylayout *L, struct pyscratch *s, u64 obj, int seq_only)
{
	u64 t = obj_type(s, obj);
	if (!t)
		return -1;
	int bad = 0;
	u64 flags = t == L->t_list || t == L->t_tuple || t == L->t_dict ? 0 : type_flags(L, t, &bad);
	u64 *h = s->obj;
	if (bad || bpf_probe_read_user(h, sizeof(s->obj), (void *)obj))
		return fail(s, PY_E_READ, obj);
	if (t == L->t_list || flags & TPF_LIST_SUBCLASS) {
		s->ikind = 0;
		s->nitems = h[2];
		s->items = h[3];
	} else if (t == L->t_tuple || flags & TPF_TUPLE_SUBCLASS) {
		s->ikind = 0;
		s->nitems = h[2];
		s->items = obj + 0x18;
	} else if (!seq_only && (t == L->t_dict || flags & TPF_DICT_SUBCLASS)) {
		// Keys in insertion order: the entries of a combined table.
		u64 keys = h[4];
		if (h[2] == 0) {
			// Empty (3.10's new dicts share an empty keys table and a
			// static values array: they look split).
			s->ikind = 1;
			s->nitems = 0;
			s->items = 0;
			return 0;
		}
		if (h[5])
			return fail(s, PY_E_TYPE, t); // split: keys in the values' order
		u64 *k = s->keys;
		if (bpf_probe_read_user(k, 4 * sizeof(u64), (void *)keys))
			return fail(s, PY_E_READ, keys);
		if (L->minor == 10) {
			u64 size = k[1];
			if (size == 0 || size > 1 << 30)
				return fail(s, PY_E_READ, keys);
			u32 ixsize = size <= 0x80 ? 1 : size <= 0x8000 ? 2 : size <= 0x80000000ULL ? 4 : 8;
			u64 n = rd64(keys + 0x20, &bad);
			s->ikind = 1;
			s->nitems = n;
			s->items = keys + 0x28 + size * ixsize;
		} else {
			u8 log2ix = (k[1] >> 8) & 0xff, kind = (k[1] >> 16) & 0xff;
			if (log2ix > 44)
				return fail(s, PY_E_READ, keys);
			s->ikind = kind ? 2 : 1;
			s->nitems = k[3];
			s->items = keys + 0x20 + (1ULL << log2ix);
		}
	} else if (seq_only) {
		s->ikind = 3;
		s->nitems = 1;
		s->items = obj;
	} else {
		return fail(s, PY_E_TYPE, t);
	}
	if (bad)
		return fail(s, PY_E_READ, obj);
	if (s->nitems > PY_MAX_ITEMS)
		return fail(s, PY_E_BIG, s->nitems);
	return 0;
}

// ---- the call's frame ---------------------------------------------------

// py_tstate is the thread state of the thread that trapped: it holds the GIL.
static __always_inline u64 py_tstate(struct pylayout *L)
{
	int bad = 0;
	u64 ts = 0;
	if (L->tstate_ptr)
		ts = rd64(L->tstate_ptr, &bad);
	else if (L->gil_ptr) {
		u64 gil = rd64(L->gil_ptr, &bad);
		if (gil && !bad)
			ts = rd64(gil + L->gil_holder, &bad);
	}
	if (bad || !objptr(ts))
		return 0;
	if (L->ts_native_tid) {
		// The holder recorded by the GIL is the thread running now; check
		// it is ours (the target numbers its threads in its namespace).
		u32 tid;
		struct bpf_pidns_info ns = {};
		if (L->ns_ino) {
			if (bpf_get_ns_current_pid_tgid(L->ns_dev, L->ns_ino, &ns, sizeof(ns)))
				return 0;
			tid = ns.pid;
		} else {
			tid = (u32)bpf_get_current_pid_tgid();
		}
		u32 native = 0;
		if (bpf_probe_read_user(&native, sizeof(native), (void *)(ts + L->ts_native_tid)) || native != tid)
			return 0;
	}
	return ts;
}

// py_callable_cb is one step of a scan of s->slots for the callable of code:
// its function, or a bound method of it (then self is the method's).
struct py_scan {
	u64 code;
	u64 self;
	u64 fn;
	u32 n;
	u32 methods_only;
	s32 at;
	u32 bad;
	u32 highest; // the highest slot holding it (the innermost call), not the lowest
	u32 pad;
};

static long py_callable_cb(u64 i, void *ctx)
{
	struct py_scan *c = ctx;
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L || i >= c->n)
		return 1;
	u64 v = s->slots[idx(i, PY_STACK_SCAN - 1)];
	if (!objptr(v))
		return 0;
	int bad = 0;
	u64 t = rd64(v + 8, &bad);
	if (bad) {
		c->bad = 1;
		return 1;
	}
	if (!c->methods_only && t == L->t_function && rd64(v + L->func_code, &bad) == c->code && !bad) {
		c->at = i;
		c->fn = v;
		c->self = 0;
		return !c->highest;
	}
	if (t == L->t_method) {
		u64 fn = rd64(v + L->im_func, &bad);
		if (fn && !bad && rd64(fn + 8, &bad) == L->t_function && rd64(fn + L->func_code, &bad) == c->code && !bad) {
			c->self = rd64(v + L->im_self, &bad);
			c->fn = fn;
			c->at = i;
			c->bad = bad;
			return !c->highest;
		}
	}
	return 0;
}

// py_self310: a bound method called with its arguments on the stack gets
// its self written over its own slot for the call (method_vectorcall), so
// the stack no longer shows it. When the caller keeps the method in a local
// (method = getattr(self, name); method()), its self is known; the other
// arguments are not, and are reported missing.
static __always_inline int py_self310(struct pylayout *L, struct pyscratch *s, u64 caller, u64 ccode, u64 code)
{
	int bad = 0;
	u32 nlocals = (u32)rd64(ccode + L->co_nlocals, &bad);
	if (bad)
		return fail(s, PY_E_NOFRAME, 15);
	u64 *slots = s->slots;
	u32 n = nlocals < PY_STACK_SCAN ? nlocals : PY_STACK_SCAN;
	if (n == 0 || bpf_probe_read_user(slots, nbytes(n, PY_STACK_SCAN, 8), (void *)(caller + L->fr_localsplus)))
		return fail(s, PY_E_NOFRAME, 16);
	struct py_scan c = {.code = code, .n = n, .methods_only = 1, .at = -1};
	bpf_loop(PY_STACK_SCAN, py_callable_cb, &c, 0);
	if (c.at >= 0 && !c.bad) {
		s->call.self = c.self;
		s->call.npos = 1;
		s->call.known = 0;
		return 0;
	}
	return fail(s, PY_E_NOFRAME, 7);
}

// py_instance_of tells whether obj's type has cls along its MRO.
static __always_inline int py_instance_of(struct pylayout *L, u64 obj, u64 cls)
{
	int bad = 0;
	u64 t = objptr(obj) ? rd64(obj + 8, &bad) : 0;
	u64 mro = t && !bad ? rd64(t + L->tp_mro, &bad) : 0;
	u64 n = objptr(mro) && !bad ? rd64(mro + 0x10, &bad) : 0;
	if (bad || !cls)
		return 0;
	for (int i = 0; i < 32; i++) {
		if (i >= n)
			break;
		if (rd64(mro + 0x18 + 8 * i, &bad) == cls && !bad)
			return 1;
	}
	return 0;
}

// py_method_kw310: a bound method called with keyword arguments straight
// from its caller (obj.method(x, k=1): LOAD_ATTR, CALL_FUNCTION_KW) has
// self written over its own slot for the call, so the callable is not on
// the stack. The tuple of keyword names still is, right above the values:
// it is the constant the instruction before the call loaded, and the call's
// slots lie below it. The slot where the method was must then hold an
// instance of the class the function was found in (else the callable was
// something else, a class say, and nothing is read); the function is the
// one found at attach, checked to run code.
static __always_inline int py_method_kw310(struct pylayout *L, struct pyscratch *s, struct pyprog *p, u64 ccode, u64 bytecode,
					   u32 lasti, u32 oparg, u32 n, u64 code)
{
	int bad = 0;
	u8 prev[4] = {};
	if (lasti < 1 || !L->op_load_const || bpf_probe_read_user(prev + 2, 2, (void *)(bytecode + L->bytes_data + 2 * lasti - 2)))
		return fail(s, PY_E_NOFRAME, 17);
	if (prev[2] != L->op_load_const)
		return fail(s, PY_E_NOFRAME, 17); // an EXTENDED_ARG before the call, or another way
	u32 ci = prev[3];
	if (lasti >= 2 && !bpf_probe_read_user(prev, 2, (void *)(bytecode + L->bytes_data + 2 * lasti - 4)) && prev[0] == L->op_extended_arg)
		ci |= (u32)prev[1] << 8;
	u64 consts = rd64(ccode + L->co_consts, &bad);
	u64 nc = objptr(consts) && !bad ? rd64(consts + 0x10, &bad) : 0;
	if (bad || ci >= nc)
		return fail(s, PY_E_NOFRAME, 18);
	u64 names = rd64(consts + 0x18 + 8 * (u64)ci, &bad);
	u64 nk = objptr(names) && !bad && rd64(names + 8, &bad) == L->t_tuple && !bad ? rd64(names + 0x10, &bad) : 0;
	if (bad || nk == 0 || nk > oparg)
		return fail(s, PY_E_NOFRAME, 18);
	// The lowest slot holding the names with room for the call below it
	// (one above the stack's top may hold them too, left by a deeper call).
	int top = -1;
	for (int i = 0; i < PY_STACK_SCAN; i++) {
		if (i >= n)
			break;
		if (i >= oparg + 1 && s->slots[i] == names) {
			top = i;
			break;
		}
	}
	if (top < 0)
		return fail(s, PY_E_NOFRAME, 19);
	u32 c = top - oparg - 1;
	u64 self = s->slots[idx(c, PY_STACK_SCAN - 1)];
	u64 fn = p->func;
	if (!py_instance_of(L, self, p->owner))
		return fail(s, PY_E_NOFRAME, 20);
	if (!objptr(fn) || rd64(fn + 8, &bad) != L->t_function || rd64(fn + L->func_code, &bad) != code || bad)
		fn = 0; // replaced: no defaults to take
	struct pycall *k = &s->call;
	k->func = fn;
	k->known = 1;
	k->posbase = c;
	k->npos = oparg - nk + 1;
	k->kwnames = names;
	k->nkw = nk;
	k->kwbase = c + 1 + oparg - nk;
	return 0;
}

// py_frame310 finds, on the value stack of the caller of a returning call
// (3.10), the callable and the arguments it passed: they stay there until
// the call has returned. The callable is a function running code, or a
// bound method of one (then self comes from the method). What is found is
// where the arguments are (s->call): by position on the stack or in a
// tuple (CALL_FUNCTION_EX), by keyword after them with a tuple of their
// names (CALL_FUNCTION_KW) or in a dict (CALL_FUNCTION_EX's **kwargs).
static __always_inline int py_frame310(struct pylayout *L, struct pyscratch *s, struct pyprog *p, u64 code)
{
	int bad = 0;
	u64 caller = rd64(s->ts + L->ts_frame, &bad);
	if (bad || !objptr(caller))
		return fail(s, PY_E_NOFRAME, 1);
	s->caller = caller;
	u64 ccode = rd64(caller + L->fr_code, &bad);
	u64 vs = rd64(caller + L->fr_valuestack, &bad);
	u32 lasti = (u32)rd64(caller + L->fr_lasti, &bad);
	u32 depth = ccode && !bad ? (u32)rd64(ccode + L->co_stacksize, &bad) : 0;
	u64 bytecode = ccode && !bad ? rd64(ccode + L->co_code, &bad) : 0;
	if (bad || !objptr(vs) || !bytecode || lasti > 1 << 24)
		return fail(s, PY_E_NOFRAME, 2);
	u8 insn[2];
	if (bpf_probe_read_user(insn, 2, (void *)(bytecode + L->bytes_data + 2 * lasti)))
		return fail(s, PY_E_NOFRAME, 3);
	u8 op = insn[0];
	u32 oparg = insn[1];
	if (lasti > 0) {
		u8 prev[2];
		if (!bpf_probe_read_user(prev, 2, (void *)(bytecode + L->bytes_data + 2 * lasti - 2)) && prev[0] == L->op_extended_arg)
			oparg |= (u32)prev[1] << 8;
	}
	if (op != L->op_call_function && op != L->op_call_method && op != L->op_call_kw && op != L->op_call_ex)
		return fail(s, PY_E_NOFRAME, 4); // called from C, or another way
	u64 *slots = s->slots;
	u32 n = depth < PY_STACK_SCAN ? depth : PY_STACK_SCAN;
	if (n == 0 || bpf_probe_read_user(slots, nbytes(n, PY_STACK_SCAN, 8), (void *)vs))
		return fail(s, PY_E_NOFRAME, 5);
	struct py_scan c = {.code = code, .n = n, .at = -1};
	bpf_loop(PY_STACK_SCAN, py_callable_cb, &c, 0);
	int at = c.at;
	if (c.bad)
		return fail(s, PY_E_NOFRAME, 7);
	if (at < 0 && op == L->op_call_kw)
		return py_method_kw310(L, s, p, ccode, bytecode, lasti, oparg, n, code);
	if (at < 0)
		return py_self310(L, s, caller, ccode, code);
	struct pycall *k = &s->call;
	k->self = c.self;
	k->func = c.fn;
	k->known = 1;
	u32 self = c.self ? 1 : 0;
	if (op == L->op_call_ex) {
		// [callable, args tuple, kwargs dict (oparg & 1)]
		if (at + 1 >= PY_STACK_SCAN || at + 1 >= n)
			return fail(s, PY_E_NOFRAME, 8);
		u64 tup = slots[idx(at + 1, PY_STACK_SCAN - 1)];
		if (rd64(tup + 8, &bad) != L->t_tuple || bad)
			return fail(s, PY_E_NOFRAME, 9);
		u64 tn = rd64(tup + 0x10, &bad);
		if (bad || tn > 1 << 20)
			return fail(s, PY_E_NOFRAME, 10);
		k->postup = tup;
		k->npos = tn + self;
		if (oparg & 1) {
			u64 d = at + 2 < n && at + 2 < PY_STACK_SCAN ? slots[idx(at + 2, PY_STACK_SCAN - 1)] : 0;
			// A mapping that is not a dict was copied into a new one,
			// which only the interpreter's C stack holds.
			if (!objptr(d) || rd64(d + 8, &bad) != L->t_dict || bad)
				k->known = 0;
			else
				k->kwdict = d;
		}
		return 0;
	}
	// [callable, positional arguments, keyword arguments, their names (CALL_FUNCTION_KW)]
	u32 npos;
	if (op == L->op_call_method)
		npos = at > 0 && slots[idx(at - 1, PY_STACK_SCAN - 1)] == 0 ? oparg : oparg + 1;
	else
		npos = oparg;
	k->posbase = at + 1;
	if (op == L->op_call_kw) {
		u32 top = at + 1 + npos;
		u64 names = top < n && top < PY_STACK_SCAN ? slots[idx(top, PY_STACK_SCAN - 1)] : 0;
		u64 nk = objptr(names) && rd64(names + 8, &bad) == L->t_tuple ? rd64(names + 0x10, &bad) : 0;
		if (!names || bad || nk > npos || nk == 0)
			return fail(s, PY_E_NOFRAME, 11);
		npos -= nk;
		k->kwnames = names;
		k->nkw = nk;
		k->kwbase = at + 1 + npos;
	}
	if (at + 1 + npos + k->nkw > n)
		return fail(s, PY_E_NOFRAME, 12);
	k->npos = npos + self;
	return 0;
}

// py_kwname310 finds the field's parameter among the call's keyword names
// (CALL_FUNCTION_KW): its index there, -1 if absent, -2 if unreadable.
// Identifiers are interned: the names a call passes are the very objects
// in the parameter's co_varnames, so pointers are compared.
static __always_inline int py_kwname310(struct pyscratch *s, struct pyfield *fl)
{
	u32 nk = s->call.nkw;
	if (nk > PY_STACK_SCAN) {
		fail(s, PY_E_BIG, nk);
		return -2;
	}
	if (nk == 0)
		return -1;
	if (bpf_probe_read_user(s->kwn, nbytes(nk, PY_STACK_SCAN, 8), (void *)(s->call.kwnames + 0x18))) {
		fail(s, PY_E_READ, s->call.kwnames);
		return -2;
	}
	for (int j = 0; j < PY_STACK_SCAN; j++) {
		if (j >= nk)
			break;
		if (s->kwn[j] == fl->argstr && fl->argstr)
			return j;
	}
	return -1;
}

// py_arg310 is the value parameter fl->slot has in the returning call
// (3.10): passed by position, by keyword, or its default.
__noinline u64 py_arg310(u32 f)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L || f >= PY_MAX_FIELDS)
		return 0;
	struct pyprog *p = prog_of(s->site);
	if (!p)
		return 0;
	struct pyfield *fl = &p->fields[idx(f, PY_MAX_FIELDS - 1)];
	struct pycall *k = &s->call;
	u32 slot = fl->slot;
	int bad = 0;
	if (fl->argkind != PYA_KWONLY && slot < k->npos) {
		u32 i = slot;
		if (k->self) {
			if (i == 0)
				return k->self;
			i--;
		}
		if (k->postup) {
			u64 v = rd64(k->postup + 0x18 + 8 * (u64)i, &bad);
			if (bad)
				fail(s, PY_E_READ, k->postup);
			return v;
		}
		u32 at = k->posbase + i;
		if (at >= PY_STACK_SCAN) {
			fail(s, PY_E_NOFRAME, 12);
			return 0;
		}
		return s->slots[idx(at, PY_STACK_SCAN - 1)];
	}
	if (!k->known) {
		fail(s, PY_E_KEYWORD, slot);
		return 0;
	}
	if (fl->argkind != PYA_POSONLY) {
		if (k->kwnames) {
			int j = py_kwname310(s, fl);
			if (j == -2)
				return 0;
			if (j >= 0) {
				u32 at = k->kwbase + j;
				if (at >= PY_STACK_SCAN) {
					fail(s, PY_E_NOFRAME, 12);
					return 0;
				}
				return s->slots[idx(at, PY_STACK_SCAN - 1)];
			}
		} else if (k->kwdict) {
			long ix;
			u64 v = py_dict_get(L, s, k->kwdict, fl->argname, &ix);
			if (ix == -2)
				return 0;
			if (ix >= 0)
				return v;
		}
	}
	// Not passed: the function's default (no temporary: left to the pop).
	if (s->push) {
		fail(s, PY_E_NOTTEMP, slot);
		return 0;
	}
	u64 fn = k->func;
	if (!fn) {
		fail(s, PY_E_NODEFAULT, slot);
		return 0;
	}
	if (fl->argkind == PYA_KWONLY) {
		u64 d = rd64(fn + L->func_kwdefaults, &bad);
		if (bad || !d || rd64(d + 8, &bad) != L->t_dict || bad) {
			fail(s, PY_E_NODEFAULT, slot);
			return 0;
		}
		long ix;
		u64 v = py_dict_get(L, s, d, fl->argname, &ix);
		if (ix == -1)
			fail(s, PY_E_NODEFAULT, slot);
		return ix >= 0 ? v : 0;
	}
	// The defaults are those of the last parameters before the keyword-only ones.
	u64 d = rd64(fn + L->func_defaults, &bad);
	u64 nd = d && !bad && rd64(d + 8, &bad) == L->t_tuple && !bad ? rd64(d + 0x10, &bad) : 0;
	s64 j = (s64)slot - ((s64)p->nargs - (s64)nd);
	if (bad || j < 0 || (u64)j >= nd) {
		fail(s, PY_E_NODEFAULT, slot);
		return 0;
	}
	u64 v = rd64(d + 0x18 + 8 * j, &bad);
	if (bad)
		fail(s, PY_E_READ, d);
	return v;
}

// py_callop tells whether op pushes a Python function's frame from the
// caller's stack (3.11+: L->callops).
static __always_inline int py_callop(struct pylayout *L, u8 op)
{
	return (L->callops[(op >> 3) & 31] >> (op & 7)) & 1;
}

// py_frame_push finds, at a push (3.11+), the arguments of the call being
// made, for those only its caller's stack holds (a temporary: f(Batch())).
// The caller is still the current frame, running a CALL; its stack holds
// [NULL or callable, callable or self, args] (3.11, 3.12) or [callable,
// self or NULL, args] (3.13), and the arguments move into the new frame only
// after the code's reference (the trap) is taken. The new frame, at the top
// of the data stack, already names its function: the one found on the
// stack must be it. Keyword arguments follow the positional ones; their
// names are a tuple: KW_NAMES' constant (3.11, 3.12), or on the stack after
// them (3.13's CALL_KW).
static __always_inline int py_frame_push(struct pylayout *L, struct pyscratch *s, struct pyprog *p, u64 code)
{
	u32 zero = 0;
	struct pyframe_layout *c = bpf_map_lookup_elem(&pyframes, &zero);
	if (!c || !c->enabled)
		return fail(s, PY_E_NOFRAME, 20);
	int bad = 0;
	u64 caller = rd64(s->ts + c->tstate_frame, &bad);
	if (c->cframe_current >= 0 && caller && !bad)
		caller = rd64(caller + c->cframe_current, &bad);
	if (bad || !objptr(caller))
		return fail(s, PY_E_NOFRAME, 21);
	u64 ccode = rd64(caller + L->fr_code, &bad) & ~c->code_tag_bits;
	u64 ip = rd64(caller + L->fr_instr, &bad);
	if (bad || !objptr(ccode) || !ip)
		return fail(s, PY_E_NOFRAME, 22);
	u8 insn[2];
	if (bpf_probe_read_user(insn, 2, (void *)ip) || !py_callop(L, insn[0]))
		return fail(s, PY_E_NOFRAME, 23); // called from C, or another way
	u32 oparg = insn[1];
	u8 before[2] = {};
	if (bpf_probe_read_user(before, 2, (void *)(ip - 2)) || before[0] == L->op_extended_arg)
		return fail(s, PY_E_NOFRAME, 24);
	u64 names = 0;
	if (L->op_kw_names) {
		u64 at = ip - 2 * (u64)L->kw_back;
		u8 kw[2] = {};
		if (bpf_probe_read_user(kw, 2, (void *)at) || bpf_probe_read_user(before, 2, (void *)(at - 2)))
			return fail(s, PY_E_NOFRAME, 31);
		if (kw[0] == L->op_kw_names) {
			if (before[0] == L->op_extended_arg)
				return fail(s, PY_E_KEYWORD, 1);
			u64 consts = rd64(ccode + L->co_consts, &bad);
			names = bad || !objptr(consts) ? 0 : rd64(consts + 0x18 + 8 * (u64)kw[1], &bad);
			if (bad || !objptr(names))
				return fail(s, PY_E_KEYWORD, 2);
		}
	}
	u32 nlocalsplus = 0, depth = 0;
	if (bpf_probe_read_user(&nlocalsplus, 4, (void *)(ccode + L->co_nlocalsplus)) ||
	    bpf_probe_read_user(&depth, 4, (void *)(ccode + L->co_stacksize)) || nlocalsplus > 1 << 16)
		return fail(s, PY_E_NOFRAME, 25);
	u64 *slots = s->slots;
	u32 n = depth < PY_STACK_SCAN ? depth : PY_STACK_SCAN;
	if (n == 0 || bpf_probe_read_user(slots, nbytes(n, PY_STACK_SCAN, 8), (void *)(caller + L->fr_localsplus + 8 * (u64)nlocalsplus)))
		return fail(s, PY_E_NOFRAME, 26);
	struct py_scan sc = {.code = code, .n = n, .at = -1, .highest = 1};
	bpf_loop(PY_STACK_SCAN, py_callable_cb, &sc, 0);
	int at = sc.at;
	if (sc.bad || at < 0 || sc.self)
		return fail(s, PY_E_NOFRAME, 27); // a bound method object: not what a CALL leaves
	u64 top = rd64(s->ts + L->ts_datastack_top, &bad);
	if (bad || rd64(top - p->frame_bytes + L->fr_funcobj, &bad) != sc.fn || bad)
		return fail(s, PY_E_NOFRAME, 28); // the frame pushed is another function's
	// Where the first parameter sits, and how many are passed by position.
	u32 first = at + 1, npos = oparg;
	if (L->self_above) {
		if (at + 1 >= n)
			return fail(s, PY_E_NOFRAME, 29);
		if (slots[idx(at + 1, PY_STACK_SCAN - 1)])
			npos++; // self
		else
			first++;
	} else if (at == 0 || slots[idx(at - 1, PY_STACK_SCAN - 1)]) {
		npos++; // [function, self, args]: a method
	}
	if (insn[0] == L->op_kw_call || insn[0] == L->op_kw_call_instr) {
		u32 top = at + 2 + oparg;
		names = top < n && top < PY_STACK_SCAN ? slots[idx(top, PY_STACK_SCAN - 1)] : 0;
		if (!objptr(names))
			return fail(s, PY_E_KEYWORD, 3);
	}
	struct pycall *k = &s->call;
	if (names) {
		u64 nk = rd64(names + 8, &bad) == L->t_tuple && !bad ? rd64(names + 0x10, &bad) : ~0ULL;
		if (bad || nk > npos)
			return fail(s, PY_E_KEYWORD, 4);
		npos -= nk;
		k->kwnames = names;
		k->nkw = nk;
		k->kwbase = first + npos;
	}
	if (first + npos + k->nkw > n)
		return fail(s, PY_E_NOFRAME, 30);
	k->func = sc.fn;
	k->posbase = first;
	k->npos = npos;
	k->known = 1;
	return 0;
}

// py_frame finds the returning call's frame (3.11+) or arguments (3.10).
__noinline int py_frame(u64 code)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L)
		return -1;
	struct pyprog *p = prog_of(s->site);
	if (!p)
		return -1;
	s->ts = py_tstate(L);
	if (!s->ts)
		return fail(s, PY_E_NOFRAME, 0);
	if (L->minor == 10)
		return py_frame310(L, s, p, code);
	if (s->push)
		return py_frame_push(L, s, p, code);
	int bad = 0;
	u64 top = rd64(s->ts + L->ts_datastack_top, &bad);
	u64 frame = top - p->frame_bytes;
	u64 fc = rd64(frame + L->fr_code, &bad);
	if (bad || fc != code)
		return fail(s, PY_E_NOFRAME, 13); // not a pop of this code's frame
	s->frame = frame;
	s->caller = rd64(frame + L->fr_previous, &bad);
	return 0;
}

// py_root is the object a field starts from.
static __always_inline u64 py_root(struct pylayout *L, struct pyscratch *s, struct pyprog *p, struct pyfield *fl)
{
	int bad = 0;
	u64 v = 0;
	u32 slot = fl->slot;
	if (s->push && (fl->root != PY_ROOT_ARG || slot >= p->nargs)) {
		fail(s, PY_E_NOTTEMP, 0); // read at the pop: not a positional parameter
		return 0;
	}
	switch (fl->root) {
	case PY_ROOT_ARG:
		if (L->minor == 10 || s->push) {
			v = py_arg310(s->field);
			if (!v) {
				if (s->err == PY_OK)
					fail(s, PY_E_UNSET, slot);
				return 0;
			}
		} else {
			v = rd64(s->frame + L->fr_localsplus + 8 * (u64)slot, &bad);
		}
		break;
	case PY_ROOT_RETURN:
		if (L->minor == 10) {
			fail(s, PY_E_NORETURN, 1); // not compiled for 3.10 (pycompile.go)
			return 0;
		} else {
			u64 ip = rd64(s->frame + L->fr_instr, &bad);
			u8 op = 0;
			if (bad || bpf_probe_read_user(&op, 1, (void *)ip) || (op != L->op_return && op != L->op_return_instr) || !op) {
				fail(s, PY_E_NORETURN, 3);
				return 0;
			}
			v = rd64(s->frame + L->fr_localsplus + 8 * (u64)p->nlocalsplus, &bad);
		}
		break;
	case PY_ROOT_CALLER: {
		u64 c = s->caller;
		u64 cc = c ? rd64(c + L->fr_code, &bad) : 0;
		if (!c || bad || cc != p->caller_code) {
			fail(s, PY_E_NOFRAME, 14);
			return 0;
		}
		v = rd64(c + L->fr_localsplus + 8 * (u64)slot, &bad);
		break;
	}
	default:
		return 0;
	}
	if (bad) {
		fail(s, PY_E_READ, s->frame);
		return 0;
	}
	if (!v) {
		fail(s, PY_E_UNSET, slot);
		return 0;
	}
	if (s->push) {
		// Only what the caller's stack alone holds (a count of 1) dies
		// with the call; the rest is read at the pop as usual. Its
		// address goes with its values: user space takes them only for
		// the object the pop finds freed.
		if (rd64(v, &bad) != 1 || bad) {
			fail(s, PY_E_NOTTEMP, v);
			return 0;
		}
		out_u8(s, PY_F_ROOT);
		out_u64(s, v);
		s->roots++;
		return v; // not a cell yet: the callee makes its cells
	}
	if (fl->cell) {
		if (!obj_type(s, v))
			return 0;
		v = rd64(v + 0x10, &bad); // PyCellObject.ob_ref
		if (bad || !v) {
			fail(s, PY_E_UNSET, slot);
			return 0;
		}
	}
	return v;
}

// py_field reads one field into the payload.
__noinline int py_field(u32 f)
{
	struct pyscratch *s = scratch();
	struct pylayout *L = layout();
	if (!s || !L || f >= PY_MAX_FIELDS)
		return -1;
	struct pyprog *p = prog_of(s->site);
	if (!p)
		return -1;
	struct pyfield *fl = &p->fields[idx(f, PY_MAX_FIELDS - 1)];
	s->field = f;
	// Attribute locations are kept per step of one field's path.
	for (int i = 0; i < PY_MAX_STEPS; i++)
		s->ctype[i] = 0;
	s->err = PY_OK;
	s->err_step = 0xff;
	s->err_item = 0xffff;
	s->err_detail = 0;
	s->count = 0;
	py_room(s);
	out_u8(s, PY_F_BEGIN);
	out_u8(s, f);
	u64 obj = py_root(L, s, p, fl);
	u32 n = fl->nsteps, it = fl->iter;
	if (n > PY_MAX_STEPS)
		n = PY_MAX_STEPS;
	if (it > n)
		it = n;
	if (obj)
		obj = py_steps(obj, 0, it);
	if (obj && it < n) {
		s->err_step = it;
		if (!py_iter(L, s, obj, fl->flags & PYF_ITER_SEQ)) {
			s->first = it + 1;
			s->last = n;
			s->chunk_at = 0;
			if (s->ikind != 3)
				out_u8(s, PY_F_LIST);
			bpf_loop(s->nitems, py_item_cb, NULL, 0);
		}
	} else if (obj) {
		py_terminal(p, f, obj);
	}
	py_room(s);
	if (s->err == PY_OK && (obj || !fl->root)) {
		out_u8(s, PY_F_END);
		return 0;
	}
	if (s->err == PY_OK)
		s->err = PY_E_READ;
	out_u8(s, PY_F_ERR);
	out_u8(s, s->err);
	out_u8(s, s->err_step);
	out_u16(s, s->err_item);
	out_u64(s, s->err_detail);
	return 0;
}
