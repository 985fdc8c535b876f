// A tight loop of calls to one small function, for measuring what a probe on
// that function costs per call. Built with -fcf-protection so the function
// starts with endbr64, as distro binaries do.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline, noipa)) int step(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

// Not a leaf, so it starts like real stage functions: endbr64; push %rbp.
__attribute__((noinline, noipa, used)) int bench_stage(int x)
{
	return step(x) + 1;
}

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
	// Park until the benchmark has armed its probes and says go.
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	int acc = 0;
	long long t0 = now_ns();
	for (long i = 0; i < n; i++)
		acc = bench_stage(acc);
	long long t1 = now_ns();
	printf("%.3f %d\n", (double)(t1 - t0) / n, acc);
	return 0;
}
