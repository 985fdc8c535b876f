// perfhold: opens one perf event on itself and sleeps until killed, so that the guest kernel
// keeps its perf scheduling hooks enabled for the whole run (scripts/vmtest.sh starts it
// first in each guest). Without it, each test's first perf event enables them and the last
// one's close disables them a second later: every flip live-patches __schedule with int3,
// and QEMU's multi-threaded TCG lets the other vCPU run into the half-patched code (a
// make test run's 6.12 and 7.3 guests died: "Oops: int3" in __schedule, from
// perf_event_alloc).
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.type = PERF_TYPE_SOFTWARE;
	attr.size = sizeof(attr);
	attr.config = PERF_COUNT_SW_DUMMY;
	if (syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0) < 0) {
		perror("perfhold: perf_event_open");
		return 1;
	}
	for (;;)
		pause();
}
