//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// Generic entry and exit programs for every probed stage. The site index comes
// from the BPF cookie, so one pair of programs serves every engine: what to
// read at each site lives in the `sites` map, filled by the loader from the spec.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s8 s8;
typedef __s16 s16;
typedef __s32 s32;
typedef __s64 s64;

// x86-64 struct pt_regs as the kernel lays it out; the uprobe context.
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

#define MAX_VALUES 4
#define MAX_DEREF 3
#define STR_LEN 32
#define MAX_SITES 256

enum source { SRC_ARG0, SRC_ARG1, SRC_ARG2, SRC_ARG3, SRC_ARG4, SRC_ARG5, SRC_RET };
enum value_type { TYPE_INT, TYPE_STRING, TYPE_VECTOR_LEN };
// The first bytes of every record: kind says which struct follows.
enum kind { KIND_ENTRY, KIND_EXIT, KIND_WATCH, KIND_PYDATA };

struct value_spec {
	u8 source;
	u8 type;
	u8 size;
	u8 nderef;
	u32 elem_size;
	s64 deref[MAX_DEREF];
};

struct site_config {
	struct value_spec values[MAX_VALUES];
	u32 nvalues;
	u32 str; // a value is a string: the record has room for it (event_str)
};

// A native stage's entry or exit: 56 bytes, with the ring's 8-byte header
// one cache line.
struct event {
	u64 boot_ns;
	u32 pid;
	u32 tid;
	u32 site;
	u8 kind;   // KIND_ENTRY, KIND_EXIT
	u8 failed; // bit i: value i could not be read
	u8 ext;     // EXT_CUDA: the thread's CUDA counters follow (event_cuda)
	u8 dropped; // events of this thread lost just before this one (at most 255 a record: the rest rides on its next)
	u64 values[MAX_VALUES];
};

// The record of a site that reads a string.
struct event_str {
	struct event ev;
	char str[STR_LEN];
};

// A thread's CUDA counters as a stage boundary saw them (cuda.h): the
// span builder takes a stage's use as the difference of its two.
struct cuda_snap {
	u64 sync_ns;  // time blocked in synchronizing calls that have returned
	u32 syncs;    // synchronizing calls that have returned
	u32 launches; // kernel launches
	u32 graphs;   // graph launches
	u32 pad;
};

enum event_ext { EXT_CUDA = 1 };

// A native stage's record while CUDA probes are armed: the event, the
// counters, then the string's room for a site that reads one (the record
// ends at str for one that does not).
struct event_cuda {
	struct event ev;
	struct cuda_snap cuda;
	char str[STR_LEN];
};

// A Python watchpoint hit; a frame pop of a stage that reads values carries
// them after it (bpf/pyread.h), in this record and in KIND_PYDATA records
// that continue it.
enum watch_flag {
	W_REFCNT_FAILED = 1,
	W_EXC_KNOWN = 2,
	W_FRAMES = 4,
	W_PAYLOAD = 8,
	W_DROPPED = 16, // events of this thread were lost just before this hit
	W_CUDA = 32,
	W_KEPT = 64, // a return whose frame outlives it: no count changed (kept_return)
};

struct watch_event {
	u64 boot_ns;
	u32 pid;
	u32 tid;
	u32 site;
	u8 kind;   // KIND_WATCH, or KIND_PYDATA for a continuation
	u8 flags;  // W_*
	u8 frames; // with W_FRAMES: frames of the code on the stack, times 2, +1 if the innermost
	u8 pyerr;  // without W_PAYLOAD on a site that reads: why (PY_E_NOFRAME: not this code's pop)
	u64 refcnt; // the count after the write
	u64 ip;
	u64 addr; // the code object watched
	u64 exc;  // the thread's exception being raised (with W_EXC_KNOWN)
	u32 len;  // payload bytes after this header
	u16 seq;  // records before this one for the same trap
	u8 last;  // no continuation follows
	u8 pyerr_at; // where the reader gave up (pyread.h's fail detail), for messages
	struct cuda_snap cuda; // with W_CUDA: the thread's CUDA counters
};

// Index: site*2 + (0 entry, 1 exit).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SITES * 2);
	__type(key, u32);
	__type(value, struct site_config);
} sites SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

// Events lost because the ring buffer was full.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} drops SEC(".maps");

// Wake the reader only once this much is waiting (a power of 2): a wakeup per event costs
// more than the probe itself (docs/design.md, "Transport and time"); the reader also drains on a timer.
volatile const u64 wakeup_bytes = 64 * 1024;

// Wake the reader only when the queued bytes cross wakeup_bytes: it drains
// everything once woken, so one wakeup serves the next wakeup_bytes of events.
// Records carry an 8-byte header in the ring; a record of size bytes just
// queued crossed if less than wakeup_bytes was there before it, with a
// window a few records wide so that records reserved at once on other CPUs
// cannot step over it.
static __always_inline u64 wakeup_flags(u64 size)
{
	u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	if (avail >= wakeup_bytes && avail < wakeup_bytes + size + 8 * (sizeof(struct event_str) + 8))
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

// Force the record layouts into BTF for bpf2go -type.
const struct event *unused_event __attribute__((unused));
const struct event_str *unused_event_str __attribute__((unused));
const struct watch_event *unused_watch_event __attribute__((unused));
const struct site_config *unused_config __attribute__((unused));
const struct event_cuda *unused_event_cuda __attribute__((unused));
const enum kind *unused_kind __attribute__((unused));
const enum watch_flag *unused_watch_flag __attribute__((unused));
const enum event_ext *unused_event_ext __attribute__((unused));

// The argument registers and rax, copied out of ctx once: the verifier refuses
// a ctx access at an offset computed from the site's configuration.
struct regs {
	u64 r[7];
};

static __always_inline void load_regs(struct pt_regs *ctx, struct regs *r)
{
	r->r[SRC_ARG0] = ctx->di;
	r->r[SRC_ARG1] = ctx->si;
	r->r[SRC_ARG2] = ctx->dx;
	r->r[SRC_ARG3] = ctx->cx;
	r->r[SRC_ARG4] = ctx->r8;
	r->r[SRC_ARG5] = ctx->r9;
	r->r[SRC_RET] = ctx->ax;
}

// read_value reads value i into e, a string into str (NULL: the record has
// no room for one).
static __always_inline int read_value(struct regs *regs, struct value_spec *v,
				      struct event *e, char *str, int i)
{
	if (v->source > SRC_RET)
		return -1;
	u64 x = regs->r[v->source];

	for (int d = 0; d < MAX_DEREF; d++) {
		if (d >= v->nderef)
			break;
		if (bpf_probe_read_user(&x, sizeof(x), (void *)(x + v->deref[d])))
			return -1;
	}

	switch (v->type) {
	case TYPE_STRING:
		if (!str || bpf_probe_read_user_str(str, STR_LEN, (void *)x) < 0)
			return -1;
		e->values[i] = 0;
		return 0;
	case TYPE_VECTOR_LEN: {
		u64 ends[2];
		if (bpf_probe_read_user(ends, sizeof(ends), (void *)x))
			return -1;
		u32 elem = v->elem_size ? v->elem_size : 1;
		e->values[i] = (ends[1] - ends[0]) / elem;
		return 0;
	}
	default:
		e->values[i] = x; // sign extension of narrow ints happens in user space
		return 0;
	}
}

// Events lost per thread, until the thread's next record carries the
// count: user space then cuts the calls the thread has open (a lost exit
// would leave one open for good). drops_pending counts the threads in
// thread_drops, so that records skip the lookup while there are none.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, u32);
} thread_drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} drops_pending SEC(".maps");

static __always_inline void count_drop(void)
{
	u32 zero = 0;
	u64 *n = bpf_map_lookup_elem(&drops, &zero);
	if (n)
		(*n)++;
	u32 tid = (u32)bpf_get_current_pid_tgid(), one = 1;
	u32 *t = bpf_map_lookup_elem(&thread_drops, &tid);
	if (t) {
		__sync_fetch_and_add(t, 1);
		return;
	}
	u64 *p = bpf_map_lookup_elem(&drops_pending, &zero);
	if (p && !bpf_map_update_elem(&thread_drops, &tid, &one, BPF_NOEXIST))
		__sync_fetch_and_add(p, 1);
}

// take_drops returns, and forgets, the events of this thread lost since
// its last record, at most max of them: the rest stay for its next record
// (a thread's entry is only ever changed from that thread, so no other CPU
// races the update).
static __always_inline u32 take_drops(u32 max)
{
	u32 zero = 0;
	u64 *p = bpf_map_lookup_elem(&drops_pending, &zero);
	if (!p || !*p)
		return 0;
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u32 *t = bpf_map_lookup_elem(&thread_drops, &tid);
	if (!t)
		return 0;
	u32 n = *t;
	if (n > max) {
		*t = n - max;
		return max;
	}
	if (!bpf_map_delete_elem(&thread_drops, &tid))
		__sync_fetch_and_add(p, -1);
	return n;
}

// Bytes each CPU has queued since load: a native event wakes the reader
// when it takes its CPU's count across a multiple of wakeup_bytes. It
// reads no ring-buffer position (bpf_ringbuf_query), whose cache line the
// reader writes as it drains: with the target and the reader on two CPUs
// that read cost a cache miss every event.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} queued SEC(".maps");

// Parts of emit that `make bench` (bench/probecost) leaves out one at a time
// to measure what each costs; 0 in every real session. The loader sets it
// before load, and the verifier drops the code of a part left out.
#define OMIT_WAKEUP 1 // the wakeup decision
#define OMIT_TIME 2   // the timestamp
#define OMIT_VALUES 4 // the value reads
#define OMIT_RING 8   // the record: reserve, fill, submit
volatile const u32 bench_omit = 0;

static __always_inline u64 native_wakeup(u64 size)
{
	if (bench_omit & OMIT_WAKEUP)
		return BPF_RB_NO_WAKEUP;
	u32 zero = 0;
	u64 *q = bpf_map_lookup_elem(&queued, &zero);
	if (!q)
		return BPF_RB_NO_WAKEUP;
	u64 before = *q, after = before + size + 8; // the ring's record header
	*q = after;
	// wakeup_bytes is a power of 2 (the loader checks): the count crossed
	// a multiple of it iff a bit at or above it changed. No division.
	return (before ^ after) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

#include "cuda.h"

// fill writes the record of one boundary; str is the string's room, or NULL.
static __always_inline void fill(struct pt_regs *ctx, struct site_config *cfg, struct event *e, char *str, u32 site, u8 kind)
{
	u64 id = bpf_get_current_pid_tgid();
	e->boot_ns = bench_omit & OMIT_TIME ? 0 : bpf_ktime_get_boot_ns();
	e->pid = id >> 32;
	e->tid = (u32)id;
	e->site = site;
	e->kind = kind;
	e->failed = 0;
	e->dropped = take_drops(0xff);
	e->ext = 0;
	struct regs regs;
	load_regs(ctx, &regs);
	for (int i = 0; i < MAX_VALUES; i++) {
		e->values[i] = 0;
		if (i >= cfg->nvalues || bench_omit & OMIT_VALUES)
			continue;
		if (read_value(&regs, &cfg->values[i], e, str, i))
			e->failed |= 1 << i;
	}
}

// cuda_submit adds the thread's CUDA counters to a record and sends it.
static __always_inline void cuda_submit(struct event_cuda *e, u64 size)
{
	if (cuda_snapshot(e->ev.tid, &e->cuda))
		e->ev.ext = EXT_CUDA;
	else
		__builtin_memset(&e->cuda, 0, sizeof(e->cuda));
	bpf_ringbuf_submit(e, native_wakeup(size));
}

// emit_cuda sends the record of one boundary with the thread's CUDA
// counters after it: the whole event_cuda for a site that reads a string,
// else the record up to the string's room. Two reservations of constant
// size, each filled in its own branch: the verifier keeps their bounds apart.
static __always_inline int emit_cuda(struct pt_regs *ctx, struct site_config *cfg, u32 site, u8 kind)
{
	const u64 short_size = __builtin_offsetof(struct event_cuda, str);
	struct event_cuda *e;
	if (cfg->str) {
		e = bpf_ringbuf_reserve(&events, sizeof(struct event_cuda), 0);
		if (!e) {
			count_drop();
			return 0;
		}
		e->str[0] = 0;
		fill(ctx, cfg, &e->ev, e->str, site, kind);
		cuda_submit(e, sizeof(struct event_cuda));
		return 0;
	}
	e = bpf_ringbuf_reserve(&events, short_size, 0);
	if (!e) {
		count_drop();
		return 0;
	}
	fill(ctx, cfg, &e->ev, 0, site, kind);
	cuda_submit(e, short_size);
	return 0;
}

// emit sends one record: reserved in the ring and written in place (one
// copy fewer than bpf_ringbuf_output), 56 bytes unless the site reads a
// string.
static __always_inline int emit(struct pt_regs *ctx, u8 kind)
{
	u32 site = (u32)bpf_get_attach_cookie(ctx);
	u32 key = site * 2 + (kind == KIND_EXIT);
	struct site_config *cfg = bpf_map_lookup_elem(&sites, &key);
	if (!cfg || bench_omit & OMIT_RING)
		return 0;
	if (cuda_on)
		return emit_cuda(ctx, cfg, site, kind);
	if (cfg->str) {
		struct event_str *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			count_drop();
			return 0;
		}
		e->str[0] = 0;
		fill(ctx, cfg, &e->ev, e->str, site, kind);
		bpf_ringbuf_submit(e, native_wakeup(sizeof(*e)));
		return 0;
	}
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop();
		return 0;
	}
	fill(ctx, cfg, e, 0, site, kind);
	bpf_ringbuf_submit(e, native_wakeup(sizeof(*e)));
	return 0;
}

SEC("uprobe.multi")
int stage_entry_multi(struct pt_regs *ctx) { return emit(ctx, KIND_ENTRY); }

SEC("uretprobe.multi")
int stage_exit_multi(struct pt_regs *ctx) { return emit(ctx, KIND_EXIT); }

// Single-site links, for kernels without uprobe_multi (before 6.6).
SEC("uprobe")
int stage_entry(struct pt_regs *ctx) { return emit(ctx, KIND_ENTRY); }

SEC("uretprobe")
int stage_exit(struct pt_regs *ctx) { return emit(ctx, KIND_EXIT); }

// A hardware write watchpoint on a Python code object's reference count hits
// once when a frame of that code is pushed (+1) and once when it is popped
// (-1). The program reports the value after the write and the instruction
// pointer; user space tells entry from exit by the change in value and the
// place it came from (docs/design.md: Python targets). At a pop of a stage
// that reads values (its requests, say) the program reads them there
// (bpf/pyread.h) and sends them with the hit.
struct watch_ctx { // struct bpf_perf_event_data, with our pt_regs
	struct pt_regs regs;
	u64 sample_period;
	u64 addr;
};

// When a hit wakes the reader at once: where a path could not be compiled
// for the BPF reader, user space reads a call's requests from its frame
// while it runs (entry), or from its caller's frame as it returns (exit).
// Other hits wait for the usual threshold or timer.
#define WAKE_ENTRY 1
#define WAKE_EXIT 2

struct watch {
	u32 site;
	u32 wake; // WAKE_ENTRY | WAKE_EXIT
	s64 last; // the count after the previous write: +1 is a push, -1 a pop
	u32 tgid; // the traced process: a hit in any other is ignored
	u32 pad;
};

// Watched address -> what it is.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SITES);
	__type(key, u64);
	__type(value, struct watch);
} watches SEC(".maps");

// Python: thread id -> address of the thread state's exception being raised
// (curexc_type / current_exception), read at each hit: non-NULL at a frame's
// pop means the call is ending by an exception. Like tstates, it is filled
// by user space and only looked up here, so it is allocated as threads come
// (BPF_F_NO_PREALLOC) instead of 16384 threads' worth at load: the two took
// a Python session from 3.2 to 5.3 MiB of kernel memory, charged to the
// daemon's memory cgroup.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, u32);
	__type(value, u64);
} exc_slots SEC(".maps");

// Python: how to walk a thread's frames (pyproc's layout), and each
// thread's state. At a -1 (at every hit on a stripped interpreter) the
// program counts the frames of the watched code on the thread's stack: a
// reference dropped while the call still runs (logging's findCaller reads
// f.f_code up the stack, and clearing its frame drops it) is no pop.
#define MAX_FRAMES 96

struct pyframe_layout {
	u64 tstate_frame;   // tstate -> current frame, or -> cframe
	s64 cframe_current; // -1, or current frame's offset in the cframe
	u64 frame_code;
	u64 frame_previous;
	u64 code_tag_bits;
	u32 enabled;
	u32 walk_entries;  // at +1s too: a stripped interpreter, whose sites have no names
	u32 exc_is_object; // 3.12+: the exception slot holds the exception, not its type
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct pyframe_layout);
} pyframes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, u32);
	__type(value, u64);
} tstates SEC(".maps");

#include "pyread.h"

// thread_state is the thread's PyThreadState: the GIL's holder where the
// layout says how to find it (every thread, started before or after
// attach), else what user space registered.
static __always_inline u64 thread_state(u32 tid)
{
	struct pylayout *L = layout();
	if (L && L->enabled) {
		u64 ts = py_tstate(L);
		if (ts)
			return ts;
	}
	u64 *ts = bpf_map_lookup_elem(&tstates, &tid);
	return ts ? *ts : 0;
}

// frames_running counts the frames of code on the thread's stack, times 2,
// plus 1 if the current (innermost) frame is one of them; -1 if unknown or
// not needed (at a +1 where the interpreter's symbols name the push sites).
__noinline int frames_running(u64 ts, u64 code, int exit)
{
	u32 zero = 0;
	struct pyframe_layout *c = bpf_map_lookup_elem(&pyframes, &zero);
	if (!c || !c->enabled || !(exit || c->walk_entries) || !ts)
		return -1;
	u64 f = 0;
	if (bpf_probe_read_user(&f, sizeof(f), (void *)(ts + c->tstate_frame)))
		return -1;
	if (c->cframe_current >= 0 && f &&
	    bpf_probe_read_user(&f, sizeof(f), (void *)(f + c->cframe_current)))
		return -1;
	int top = 0, n = 0;
	for (int i = 0; i < MAX_FRAMES && f; i++) {
		u64 fc = 0, prev = 0;
		if (bpf_probe_read_user(&fc, sizeof(fc), (void *)(f + c->frame_code)) ||
		    bpf_probe_read_user(&prev, sizeof(prev), (void *)(f + c->frame_previous)))
			return -1;
		int match = (fc & ~c->code_tag_bits) == code;
		n += match;
		if (i == 0)
			top = match;
		f = prev;
	}
	if (f)
		return -1; // deeper than we walk
	return 2 * n + top;
}

// watch_header fills what every hit reports; flags: W_DROPPED or 0.
static __always_inline void watch_header(struct watch_event *e, struct watch *w, u64 ip, u64 addr, u64 pid_tgid, u8 flags)
{
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->pid = pid_tgid >> 32;
	e->tid = (u32)pid_tgid;
	e->site = w->site;
	e->kind = KIND_WATCH;
	e->flags = flags;
	e->frames = 0;
	e->pyerr = 0;
	e->refcnt = 0;
	if (bpf_probe_read_user(&e->refcnt, sizeof(u64), (void *)addr))
		e->flags |= W_REFCNT_FAILED;
	e->ip = ip;
	// Which object: after a watch moves to a new code object of the same
	// site, events still queued from the old one must be told apart.
	e->addr = addr;
	e->exc = 0;
	u32 tid = e->tid;
	u64 *slot = bpf_map_lookup_elem(&exc_slots, &tid);
	if (slot && !bpf_probe_read_user(&e->exc, sizeof(u64), (void *)*slot)) {
		// Its type, read now: the exception itself is gone by the time
		// user space looks.
		u32 zero = 0;
		struct pyframe_layout *c = bpf_map_lookup_elem(&pyframes, &zero);
		if (!e->exc || !c || !c->exc_is_object ||
		    !bpf_probe_read_user(&e->exc, sizeof(u64), (void *)(e->exc + 8)))
			e->flags |= W_EXC_KNOWN;
	}
	e->len = 0;
	e->seq = 0;
	e->last = 1;
	e->pyerr_at = 0;
	if (cuda_on && cuda_snapshot(e->tid, &e->cuda))
		e->flags |= W_CUDA;
	else
		__builtin_memset(&e->cuda, 0, sizeof(e->cuda));
}

// send_fields reads, at a pop, the site's fields into the payload and sends
// the hit with them. It runs in a tail call of the program that took the
// hit (watch_fields, kept_fields), so that its chain of calls (a field, each
// item, each step, a dict lookup, a key) has the whole 512 bytes of stack
// that kernels before 6.13 give a program and the calls it makes together;
// the hit's program has written its header into the scratch and said what
// to read there.
static __always_inline int send_fields(void)
{
	struct pyscratch *s = scratch();
	if (!s)
		return 0;
	struct pyprog *p = prog_of(s->site);
	struct watch_event *e = (struct watch_event *)s->buf;
	if (!p)
		return 0;
	if (py_frame(s->code)) {
		// The hit goes without its values, saying why (at a push: the
		// pop reads them).
		if (!s->push) {
			e->pyerr = s->err;
			e->pyerr_at = s->err_detail;
		}
		u64 flags = s->wake ? BPF_RB_FORCE_WAKEUP : wakeup_flags(sizeof(*e));
		if (bpf_ringbuf_output(&events, e, sizeof(*e), flags))
			count_drop();
		return 0;
	}
	e->flags |= W_PAYLOAD;
	for (u32 f = 0; f < PY_MAX_FIELDS; f++) {
		if (f >= p->nfields)
			break;
		py_field(f);
	}
	if (s->push && !s->roots) {
		// No argument only the call holds: the bare entry (the pop reads
		// them all), so that a call pays for its reads once.
		e->flags &= ~W_PAYLOAD;
		u64 flags = s->wake ? BPF_RB_FORCE_WAKEUP : wakeup_flags(sizeof(*e));
		if (bpf_ringbuf_output(&events, e, sizeof(*e), flags))
			count_drop();
		return 0;
	}
	py_flush(s, 1);
	return 0;
}

SEC("perf_event")
int watch_fields(struct watch_ctx *ctx)
{
	return send_fields();
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
	__array(values, int(struct watch_ctx *));
} watch_tail SEC(".maps") = {
	.values = {[0] = (void *)&watch_fields},
};

// watch_read sets up, at a pop (or at a push, for the temporaries among the
// arguments), the reading of the site's fields and hands the hit to
// watch_fields, which sends it; it returns (and the caller sends the bare
// hit) where the site reads nothing, or the tail call fails.
static __always_inline void watch_read(void *ctx, void *tail, u64 ip, struct watch *w, u64 addr, u64 pid_tgid, u8 flags, int frames, u32 push)
{
	struct pylayout *L = layout();
	struct pyprog *p = prog_of(w->site);
	struct pyscratch *s = scratch();
	if (!L || !L->enabled || !p || !p->nfields || !s || (push && !p->push))
		return;
	struct watch_event *e = (struct watch_event *)s->buf;
	watch_header(e, w, ip, addr, pid_tgid, flags);
	if (frames >= 0) {
		e->flags |= W_FRAMES;
		e->frames = frames;
	}
	s->site = w->site;
	s->push = push;
	s->roots = 0;
	s->code = addr;
	s->wake = w->wake & (push ? WAKE_ENTRY : WAKE_EXIT);
	s->off = sizeof(*e);
	s->seq = 0;
	s->err = PY_OK;
	s->err_detail = 0;
	__builtin_memset(&s->call, 0, sizeof(s->call));
	s->frame = s->caller = 0;
	for (int i = 0; i < PY_MAX_NAMES; i++)
		s->keyptr[i] = 0;
	bpf_tail_call(ctx, tail, 0);
}

// send_hit sends a hit without values: where the site reads none, or
// its reads did not start (watch_read returned). force wakes the reader.
static __always_inline void send_hit(struct watch *w, u64 ip, u64 addr, u64 pid_tgid, u8 flags, int frames, int force)
{
	struct watch_event *e = bpf_ringbuf_reserve(&events, sizeof(struct watch_event), 0);
	if (!e) {
		count_drop();
		return;
	}
	watch_header(e, w, ip, addr, pid_tgid, flags);
	if (frames >= 0) {
		e->flags |= W_FRAMES;
		e->frames = frames;
	}
	bpf_ringbuf_submit(e, force ? BPF_RB_FORCE_WAKEUP : wakeup_flags(sizeof(*e)));
}

SEC("perf_event")
int watch_hit(struct watch_ctx *ctx)
{
	u64 addr = ctx->addr;
	struct watch *w = bpf_map_lookup_elem(&watches, &addr);
	if (!w)
		return 0;
	u64 id = bpf_get_current_pid_tgid();
	if (w->tgid && (u32)(id >> 32) != w->tgid)
		return 0; // a process that is not the target (a breakpoint inherited by a fork)
	s64 now = 0, last = w->last;
	bpf_probe_read_user(&now, sizeof(now), (void *)addr);
	w->last = now;
	u64 ts = thread_state((u32)id);
	int frames = frames_running(ts, addr, now < last);
	u8 lost = take_drops(0xffffffff) ? W_DROPPED : 0;
	if (now < last && now > 0)
		watch_read(ctx, &watch_tail, ctx->regs.ip, w, addr, id, lost, frames, 0);
	else if (now > last && last > 0)
		watch_read(ctx, &watch_tail, ctx->regs.ip, w, addr, id, lost, frames, 1);
	// Wake the reader at once where it reads the target's memory while the
	// call (or its caller) still runs, and when the code object is freed
	// (its stage is looked up again). The direction is a hint only (user
	// space classifies each write by its instruction); a wrong guess costs
	// a wakeup or a read that comes late, never a wrong span.
	int force = now == 0 || (w->wake & WAKE_ENTRY && now > last) || (w->wake & WAKE_EXIT && now < last);
	send_hit(w, ctx->regs.ip, addr, id, lost, frames, force);
	return 0;
}

// Python 3.10 and 3.11: a call whose frame outlives it (a traceback kept,
// sys._getframe(), a thread holding sys._current_frames()) writes nothing to
// its code object's count as it returns: the frame object takes the
// frame's reference over, and drops it only when it dies. kept_return is a
// uprobe where the interpreter hands a returning frame to its frame object
// (loader/keptreturn.go finds the place and the register holding the
// frame): a frame of watched code there makes the hit its pop would have
// made, flagged W_KEPT, with the values the pop would have read.
enum kept_reg {
	KEPT_SI,
	KEPT_BX,
	KEPT_BP,
	KEPT_R12,
	KEPT_R13,
	KEPT_R14,
	KEPT_R15,
};

struct kept_config {
	u32 reg; // enum kept_reg
	u32 enabled;
};

const enum kept_reg *unused_kept_reg __attribute__((unused));
const struct kept_config *unused_kept_config __attribute__((unused));

// The programs themselves are built by kept.c, which includes this file
// with KEPT_RETURN defined, and loaded apart: verifying kept_fields takes as
// long as verifying everything else here (loader/keptarm.go).
#ifdef KEPT_RETURN
// kept_fields is watch_fields for kept_return, a uprobe (a tail call stays
// within its program type).
SEC("uprobe")
int kept_fields(struct pt_regs *ctx)
{
	return send_fields();
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
	__array(values, int(struct pt_regs *));
} kept_tail SEC(".maps") = {
	.values = {[0] = (void *)&kept_fields},
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct kept_config);
} kept_cfg SEC(".maps");

// kept_frame reads the register reg names, copied out of ctx first (a ctx
// access at a computed offset is refused, as in load_regs).
static __always_inline u64 kept_frame(struct pt_regs *ctx, u32 reg)
{
	u64 r[KEPT_R15 + 1] = {ctx->si, ctx->bx, ctx->bp, ctx->r12, ctx->r13, ctx->r14, ctx->r15};
	if (reg > KEPT_R15)
		return 0;
	return r[reg];
}

SEC("uprobe")
int kept_return(struct pt_regs *ctx)
{
	u32 zero = 0;
	struct kept_config *k = bpf_map_lookup_elem(&kept_cfg, &zero);
	struct pyframe_layout *c = bpf_map_lookup_elem(&pyframes, &zero);
	if (!k || !k->enabled || !c || !c->enabled)
		return 0;
	u64 frame = kept_frame(ctx, k->reg), code = 0;
	if (!frame || bpf_probe_read_user(&code, sizeof(code), (void *)(frame + c->frame_code)))
		return 0;
	code &= ~c->code_tag_bits;
	struct watch *w = bpf_map_lookup_elem(&watches, &code);
	if (!w)
		return 0; // not a stage: the common case
	u64 id = bpf_get_current_pid_tgid();
	if (w->tgid && (u32)(id >> 32) != w->tgid)
		return 0;
	int frames = frames_running(thread_state((u32)id), code, 1);
	u8 lost = (take_drops(0xffffffff) ? W_DROPPED : 0) | W_KEPT;
	// The frame is intact here, and where a pop reads it: on 3.11 still on
	// the thread's stack, on 3.10 its arguments still on its caller's.
	watch_read(ctx, &kept_tail, ctx->ip, w, code, id, lost, frames, 0);
	send_hit(w, ctx->ip, code, id, lost, frames, w->wake & WAKE_EXIT);
	return 0;
}

#endif

// Programs that do nothing: the baseline `make bench` compares against.
SEC("uprobe")
int bare(struct pt_regs *ctx) { return 0; }

SEC("uprobe.multi")
int bare_multi(struct pt_regs *ctx) { return 0; }

SEC("perf_event")
int watch_bare(void *ctx) { return 0; }

char LICENSE[] SEC("license") = "Dual BSD/GPL";
