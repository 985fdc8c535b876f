// A loop of CUDA driver calls against the stand-in driver
// (integration/testdata/fakecuda.c with no queued work): N launches, then N
// stream syncs, each timed, for measuring what specprobe's CUDA probes cost
// per call. Prints "LAUNCH_NS SYNC_NS" per call.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
int cuStreamSynchronize(void *);

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	char line[16];
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	long long t0 = now_ns();
	for (long i = 0; i < n; i++)
		cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
	long long t1 = now_ns();
	for (long i = 0; i < n; i++)
		cuStreamSynchronize(0);
	long long t2 = now_ns();
	printf("%.3f %.3f\n", (double)(t1 - t0) / n, (double)(t2 - t1) / n);
	return 0;
}
