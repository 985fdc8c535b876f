// A native speculative engine whose stages call the CUDA driver (the
// stand-in, fakecuda.c, linked as libcuda.so.1): per step, a draft that
// launches kernels and never waits, a verify that launches kernels and a
// graph and waits for everything queued, then outside any stage two
// launches and a synchronous copy, then a draft-extend that launches and
// waits on an event. It logs, per stage call and per step's outside part,
// the launches it made and how long each sync blocked by its own clock
// (CLOCK_BOOTTIME, the clock BPF reads):
//   {"stage":"verify","rid":"req-1","launches":3,"graphs":1,"syncs":1,"sync_ns":1234}
// Usage: cudaengine LOG STEPS; it prints "ready" and waits for SIGUSR1.
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
int cuLaunchKernelEx(const void *, void *, void **, void **);
int cuLaunchKernel_ptsz(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
int cuGraphLaunch(void *, void *);
int cuStreamSynchronize(void *);
int cuStreamSynchronize_ptsz(void *);
int cuEventSynchronize(void *);
int cuCtxSynchronize(void);
int cuMemcpyDtoH_v2(void *, uint64_t, size_t);
int cuMemcpyDtoHAsync_v2(void *, uint64_t, size_t, void *);

static FILE *logf;

struct use {
	int launches, graphs, syncs;
	uint64_t sync_ns;
};

static uint64_t boot_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void launch(struct use *u, int i)
{
	// Both entry points torch uses, and an alias of one.
	if (i % 3 == 0)
		cuLaunchKernelEx(0, 0, 0, 0);
	else if (i % 3 == 1)
		cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
	else
		cuLaunchKernel_ptsz(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
	u->launches++;
}

// timed runs one synchronizing call, timing it by the engine's own clock.
#define timed(u, call)                          \
	do {                                    \
		uint64_t t0 = boot_ns();        \
		call;                           \
		(u)->sync_ns += boot_ns() - t0; \
		(u)->syncs++;                   \
	} while (0)

static void put(const char *stage, const char *rid, struct use *u)
{
	fprintf(logf, "{\"stage\":\"%s\",\"rid\":\"%s\",\"launches\":%d,\"graphs\":%d,\"syncs\":%d,\"sync_ns\":%llu}\n",
		stage, rid, u->launches, u->graphs, u->syncs, (unsigned long long)u->sync_ns);
}

__attribute__((noinline)) void engine_draft(const char *rid, int step, struct use *u)
{
	char buf[16];
	for (int i = 0; i < 2 + step % 4; i++)
		launch(u, i);
	cuMemcpyDtoHAsync_v2(buf, 0, sizeof(buf), 0); // no wait
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void engine_verify(const char *rid, int step, struct use *u)
{
	for (int i = 0; i < 1 + step % 3; i++)
		launch(u, i);
	cuGraphLaunch(0, 0);
	u->graphs++;
	if (step % 2)
		timed(u, cuStreamSynchronize(0));
	else
		timed(u, cuStreamSynchronize_ptsz(0));
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void engine_draft_extend(const char *rid, int step, struct use *u)
{
	launch(u, step);
	timed(u, cuEventSynchronize(0));
	if (step % 5 == 0)
		timed(u, cuCtxSynchronize());
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: cudaengine LOG STEPS\n");
		return 2;
	}
	logf = fopen(argv[1], "w");
	int steps = atoi(argv[2]);
	if (!logf || steps <= 0)
		return 2;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, 0);
	printf("ready\n");
	fflush(stdout);
	int sig;
	sigwait(&set, &sig);
	for (int step = 0; step < steps; step++) {
		char rid[16];
		snprintf(rid, sizeof(rid), "req-%d", step % 4);
		struct use d = {0}, v = {0}, x = {0}, out = {0};
		engine_draft(rid, step, &d);
		engine_verify(rid, step, &v);
		// Outside any stage: two launches and a copy that waits for them.
		char buf[8];
		launch(&out, 1);
		launch(&out, 2);
		timed(&out, cuMemcpyDtoH_v2(buf, 0, sizeof(buf)));
		engine_draft_extend(rid, step, &x);
		put("draft", rid, &d);
		put("verify", rid, &v);
		put("draft_extend", rid, &x);
		put("outside", rid, &out);
	}
	fclose(logf);
	return 0;
}
