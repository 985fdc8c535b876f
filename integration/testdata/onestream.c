// A one-stream speculative engine, as llama.cpp's speculative example runs:
// no request object reaches a stage. Each thread serves REQUESTS requests,
// one call of run_request each, of STEPS steps: draft(state, n_draft) then
// verify(state, n_draft), which returns how many drafts it accepted. Between
// two requests a thread sleeps GAP_MS. With ROUNDS, that many rounds of
// THREADS threads run one after another: threads exit and new ones start
// while the process runs, as a thread pool's do. It logs every stage call, with its
// thread, its times (CLOCK_REALTIME, as spans carry them), the thread's
// request number (from 1) and its counts:
//   {"stage":"verify","tid":42,"start_ns":1,"end_ns":2,"request":1,"num_drafts":4,"num_correct_drafts":2}
// Usage: onestream LOG THREADS REQUESTS STEPS GAP_MS [ROUNDS]; it prints "ready" and
// waits for SIGUSR1.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

// A real, never-inlined global symbol to probe, its prologue first.
#define PROBE __attribute__((noinline, noipa, used, optimize("no-schedule-insns2")))

static FILE *logf;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int threads, requests, steps, gap_ms;
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void work_us(uint64_t seed, int us)
{
	struct timespec ts = {0, us * 1000L};
	uint64_t h = seed | 1;
	for (int i = 0; i < 2000; i++)
		h = (h ^ (uint64_t)i) * 0x100000001b3ull;
	sink = h;
	nanosleep(&ts, NULL);
}

PROBE int stream_draft(uint64_t *state, int n_draft)
{
	*state = *state * 6364136223846793005ull + 1;
	work_us(*state, 200 + (int)(*state >> 33) % 300);
	return n_draft;
}

PROBE int stream_verify(uint64_t *state, int n_draft)
{
	*state = *state * 6364136223846793005ull + 1;
	work_us(*state, 300 + (int)(*state >> 33) % 400);
	return (int)((*state >> 40) % (uint64_t)(n_draft + 1));
}

static void log_call(const char *stage, uint64_t t0, uint64_t t1, int request, int drafts, int correct)
{
	pthread_mutex_lock(&log_mu);
	fprintf(logf, "{\"stage\":\"%s\",\"tid\":%d,\"start_ns\":%llu,\"end_ns\":%llu,\"request\":%d,\"num_drafts\":%d",
		stage, (int)gettid(), (unsigned long long)t0, (unsigned long long)t1, request, drafts);
	if (correct >= 0)
		fprintf(logf, ",\"num_correct_drafts\":%d", correct);
	fprintf(logf, "}\n");
	pthread_mutex_unlock(&log_mu);
}

// run_request is the request's boundary: one call per request.
PROBE void run_request(uint64_t *state, int request)
{
	for (int s = 0; s < steps; s++) {
		int n_draft = 2 + (int)(*state % 4);
		uint64_t t0 = now_ns();
		int drafted = stream_draft(state, n_draft);
		uint64_t t1 = now_ns();
		log_call("draft", t0, t1, request, drafted, -1);
		t0 = now_ns();
		int correct = stream_verify(state, drafted);
		t1 = now_ns();
		log_call("verify", t0, t1, request, drafted, correct);
	}
}

static void *worker(void *arg)
{
	uint64_t state = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	for (int r = 1; r <= requests; r++) {
		if (r > 1 && gap_ms > 0) {
			struct timespec ts = {gap_ms / 1000, (gap_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		run_request(&state, r);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: onestream LOG THREADS REQUESTS STEPS GAP_MS [ROUNDS]\n");
		return 2;
	}
	logf = fopen(argv[1], "w");
	if (!logf) {
		perror(argv[1]);
		return 1;
	}
	threads = atoi(argv[2]), requests = atoi(argv[3]), steps = atoi(argv[4]), gap_ms = atoi(argv[5]);
	int rounds = argc == 7 ? atoi(argv[6]) : 1;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	printf("ready\n");
	fflush(stdout);
	int sig;
	sigwait(&set, &sig);
	pthread_t th[64];
	if (threads > 64)
		threads = 64;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < threads; i++)
			pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(r * threads + i + 1));
		for (int i = 0; i < threads; i++)
			pthread_join(th[i], NULL);
	}
	fclose(logf);
	return 0;
}
