// A stand-in for the CUDA driver (libcuda.so.1) with no GPU behind it:
// exported under the driver's names, a launch queues FAKECUDA_KERNEL_US of
// "GPU work" (FAKECUDA_GRAPH_US for a graph) and returns at once; a
// synchronizing call sleeps until the work queued so far is done. Built by
// the tests and make bench as libcuda.so.1 with -fcf-protection=none
// -fno-omit-frame-pointer: every entry starts with push %rbp, as NVIDIA's
// do (an instruction uprobes emulate; others are single-stepped, at several
// times the cost).
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;

static __thread uint64_t done_at; // when the thread's queued work ends (CLOCK_MONOTONIC ns)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t env_us(const char *name, uint64_t def)
{
	const char *s = getenv(name);
	return s ? strtoull(s, 0, 10) : def;
}

static void queue(uint64_t us)
{
	uint64_t now = now_ns();
	if (done_at < now)
		done_at = now;
	done_at += us * 1000;
}

static void wait_queued(void)
{
	struct timespec ts = {.tv_sec = done_at / 1000000000ull, .tv_nsec = done_at % 1000000000ull};
	while (done_at > now_ns() && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, 0) == EINTR)
		;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			unsigned shmem, void *stream, void **params, void **extra)
{
	queue(env_us("FAKECUDA_KERNEL_US", 200));
	return 0;
}

CUresult cuLaunchKernelEx(const void *config, void *f, void **params, void **extra)
{
	queue(env_us("FAKECUDA_KERNEL_US", 200));
	return 0;
}

CUresult cuGraphLaunch(void *graph, void *stream)
{
	queue(env_us("FAKECUDA_GRAPH_US", 500));
	return 0;
}

CUresult cuStreamSynchronize(void *stream) { wait_queued(); return 0; }
CUresult cuCtxSynchronize(void) { wait_queued(); return 0; }
CUresult cuEventSynchronize(void *event) { wait_queued(); return 0; }

CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n)
{
	wait_queued();
	memset(dst, 0, n);
	return 0;
}

// Not probed: asynchronous, and returns at once.
CUresult cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t n, void *stream)
{
	memset(dst, 0, n);
	return 0;
}

// Aliases, as the real driver has: one address, one probe.
CUresult cuStreamSynchronize_ptsz(void *stream) __attribute__((alias("cuStreamSynchronize")));
CUresult cuLaunchKernel_ptsz(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			     unsigned shmem, void *stream, void **params, void **extra) __attribute__((alias("cuLaunchKernel")));
