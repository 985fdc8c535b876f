//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// Exec notification for the daemon: one event per successful execve on the
// node, so a new inference server is classified within milliseconds instead
// of at the next /proc scan. A raw tracepoint needs no tracefs mount, which a
// container usually lacks.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// PIDs are the kernel's (the initial PID namespace's): the daemon runs there
// (hostPID), which is how it sees every container's processes in /proc.
struct exec_event {
	__u32 pid;
	__u32 pad;
	__u64 boot_ns; // when: an event read late must not undo a newer look
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} execs SEC(".maps");

// Counted when the ring buffer is full: the daemon then rescans /proc.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} exec_drops SEC(".maps");

SEC("raw_tracepoint/sched_process_exec")
int on_exec(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct exec_event *e = bpf_ringbuf_reserve(&execs, sizeof(*e), 0);
	if (!e) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&exec_drops, &zero);
		if (n)
			__sync_fetch_and_add(n, 1);
		return 0;
	}
	e->pid = pid;
	e->pad = 0;
	e->boot_ns = bpf_ktime_get_boot_ns();
	// Execs are rare next to stage events: wake the reader for each.
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
