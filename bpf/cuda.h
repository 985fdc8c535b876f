// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// Probes on the CUDA driver (libcuda.so.1): per thread, the time blocked in
// its synchronizing calls and the kernels and graphs it launched. The stage
// programs copy a thread's counters into each boundary's record, so a
// stage's share is the difference between its entry and its exit, with no
// record of their own. A thread is in one place at a time: a stage's
// boundary never falls inside one of its own thread's syncs, so the time of
// every sync that returned between the two is the stage's, whole.

// Set by the loader before load when it arms the CUDA probes; 0 leaves the
// stage records as they were (the verifier drops the code).
volatile const u32 cuda_on = 0;

// Where a thread stands: counters, and the sync it is in.
struct cuda_thread {
	struct cuda_snap c;
	u64 since; // boot ns when the outermost sync in progress began
	u32 depth; // syncs in progress (a sync the driver makes from another)
	u32 pad;
};

// Thread id -> its counters. LRU: a thread gone is forgotten first; one
// pushed out while alive starts again from 0, which the span builder sees
// as counters that went back and reports no use for that stage.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384); // as thread_drops; 1 where CUDA is off (loader/attach.go)
	__type(key, u32);
	__type(value, struct cuda_thread);
} cuda_threads SEC(".maps");

static __always_inline struct cuda_thread *cuda_thread_of(u32 tid)
{
	struct cuda_thread *t = bpf_map_lookup_elem(&cuda_threads, &tid);
	if (t)
		return t;
	struct cuda_thread zero = {};
	bpf_map_update_elem(&cuda_threads, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&cuda_threads, &tid);
}

// cuda_snapshot copies the thread's counters; 0 when the map has no room.
static __always_inline int cuda_snapshot(u32 tid, struct cuda_snap *out)
{
	struct cuda_thread *t = cuda_thread_of(tid);
	if (!t)
		return 0;
	*out = t->c;
	return 1;
}

// The launch probes' cookie.
#define CUDA_KERNEL 0
#define CUDA_GRAPH 1

// Only the thread itself writes its entry: plain increments.
static __always_inline int cuda_count_launch(struct pt_regs *ctx)
{
	struct cuda_thread *t = cuda_thread_of((u32)bpf_get_current_pid_tgid());
	if (!t)
		return 0;
	if (bpf_get_attach_cookie(ctx) == CUDA_GRAPH)
		t->c.graphs++;
	else
		t->c.launches++;
	return 0;
}

SEC("uprobe.multi")
int cuda_launch_multi(struct pt_regs *ctx) { return cuda_count_launch(ctx); }

static __always_inline int cuda_sync_enter(void)
{
	struct cuda_thread *t = cuda_thread_of((u32)bpf_get_current_pid_tgid());
	if (!t)
		return 0;
	if (t->depth == 0)
		t->since = bpf_ktime_get_boot_ns();
	t->depth++;
	return 0;
}

static __always_inline int cuda_sync_leave(void)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct cuda_thread *t = bpf_map_lookup_elem(&cuda_threads, &tid);
	if (!t || t->depth == 0)
		return 0; // its entry came before the probes, or the thread was pushed out
	if (--t->depth == 0) {
		t->c.sync_ns += bpf_ktime_get_boot_ns() - t->since;
		t->c.syncs++;
	}
	return 0;
}

SEC("uprobe.multi")
int cuda_sync_entry_multi(struct pt_regs *ctx) { return cuda_sync_enter(); }

SEC("uretprobe.multi")
int cuda_sync_exit_multi(struct pt_regs *ctx) { return cuda_sync_leave(); }

// Single-address links, for kernels without uprobe_multi.
SEC("uprobe")
int cuda_launch(struct pt_regs *ctx) { return cuda_count_launch(ctx); }

SEC("uprobe")
int cuda_sync_entry(struct pt_regs *ctx) { return cuda_sync_enter(); }

SEC("uretprobe")
int cuda_sync_exit(struct pt_regs *ctx) { return cuda_sync_leave(); }
