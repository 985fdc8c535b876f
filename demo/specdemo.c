// specdemo: a tiny stand-in for a speculative-decoding server, traced by specprobe's demo probe spec.
//
// Worker threads each serve a batch of requests. One step is: demo_draft per request,
// demo_verify once for the batch, demo_accept per request, demo_draft_extend once for the batch.
// The four demo_* functions are the probe points: their names, signatures and the request layout
// (id string at offset 0) are an ABI the probe spec relies on, so keep them as they are.
// With --log the process writes its own ground truth (one JSON line per stage call) so a trace can
// be checked against it.
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// noipa: a real, uncloned, never-inlined global symbol to probe. no-schedule-insns2: keep the
// prologue (endbr64 with CET, then push %rbp) as the first instructions; without it gcc may hoist a
// constant load above the push, and the probe spec expects the classic frame-pointer entry.
#define PROBE __attribute__((noinline, noipa, used, optimize("no-schedule-insns2")))

struct request {
    char id[32];  // NUL-terminated "req-%06d"; must stay at offset 0 (read by the probe spec)
    int tokens;   // tokens generated so far
    uint64_t state;  // running hash, so the stages do work that depends on the request
};

static struct {
    int threads, batch, requests, max_tokens, draft_len, crash_step, wait_signal;
    uint64_t seed;
    const char *log;
} opt = {2, 3, 40, 24, 4, 0, 0, 1, NULL};

static FILE *logf;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int next_req;   // requests started so far, globally; ids are 1-based
static atomic_int stopping;   // set by SIGTERM/SIGINT: start no new requests
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open;         // workers wait here until startup (or SIGUSR1) releases them
static volatile uint64_t sink;  // keeps the hashing work from being optimised away

static __thread uint64_t rng;       // per-thread xorshift state: runs are reproducible per --seed
static __thread int worker_idx;
static __thread int verify_calls;

struct stats { long done, steps, drafts, accepted; };

static uint64_t xorshift(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}
static int rand_between(int lo, int hi) { return lo + (int)(xorshift() % (uint64_t)(hi - lo + 1)); }

static uint64_t now_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// A few microseconds of real CPU work, then sleep until a deadline fixed at entry: the stage takes
// its drawn duration whatever the CPU load or probe overhead, and two shared cores stay mostly idle.
static void stage_work(uint64_t seed, int iters, int dur_us) {
    uint64_t deadline = now_ns(CLOCK_MONOTONIC) + (uint64_t)dur_us * 1000u;
    uint64_t h = seed | 1;
    for (int i = 0; i < iters; i++) h = (h ^ (uint64_t)i) * 0x100000001b3ull;  // FNV-style mixing
    sink = h;
    if (dur_us <= 0) return;
    struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {}  // retry on EINTR
}

PROBE int demo_draft(struct request *req, int n_draft) {
    for (int i = 0; i < n_draft; i++) req->state = req->state * 6364136223846793005ull + 1;
    stage_work(req->state, 2000, rand_between(300, 800));
    return n_draft;
}

PROBE int demo_verify(struct request **batch, int n) {
    uint64_t h = 0;
    for (int i = 0; i < n; i++) h ^= batch[i]->state;
    if (opt.crash_step > 0 && worker_idx == 0 && ++verify_calls == opt.crash_step) {
        // Die halfway through the stage, as a crashing target would. Flush the ground truth
        // written so far (under the lock, so no half line) since _exit skips stdio.
        stage_work(h, 2000, 500);
        pthread_mutex_lock(&log_mu);
        if (logf) fflush(logf);
        _exit(3);
    }
    stage_work(h, 5000, rand_between(1000, 3000));
    return n;
}

PROBE void demo_accept(struct request *req, int num_correct) {
    req->state ^= (uint64_t)num_correct * 0x9e3779b97f4a7c15ull;
    stage_work(req->state, 500, 0);  // bookkeeping only: no sleep
}

PROBE void demo_draft_extend(struct request **batch, int n) {
    uint64_t h = 0;
    for (int i = 0; i < n; i++) h += batch[i]->state;
    stage_work(h, 1000, rand_between(200, 500));
}

// One ground-truth line. extra_name is NULL for stages without a count.
static void log_stage(const char *stage, uint64_t t0, uint64_t t1, struct request **reqs, int n,
                      const char *extra_name, int extra) {
    if (!logf) return;
    pthread_mutex_lock(&log_mu);
    fprintf(logf, "{\"stage\":\"%s\",\"tid\":%d,\"start_ns\":%llu,\"end_ns\":%llu,\"rids\":[",
            stage, (int)gettid(), (unsigned long long)t0, (unsigned long long)t1);
    for (int i = 0; i < n; i++) fprintf(logf, "%s\"%s\"", i ? "," : "", reqs[i]->id);
    fprintf(logf, "]");
    if (extra_name) fprintf(logf, ",\"%s\":%d", extra_name, extra);
    fprintf(logf, "}\n");
    pthread_mutex_unlock(&log_mu);
}

// Take the next global request number, or 0 when all have been started (or we are stopping).
static int claim_request(void) {
    if (atomic_load(&stopping)) return 0;
    int id = atomic_fetch_add(&next_req, 1) + 1;
    return id <= opt.requests ? id : 0;
}

struct worker_arg { struct stats st; int idx; uint64_t seed; };

static void *worker(void *arg) {
    struct worker_arg *wa = arg;
    struct stats *st = &wa->st;
    worker_idx = wa->idx;
    // splitmix64 of seed+idx: distinct, never-zero xorshift states per thread.
    uint64_t z = wa->seed + 0x9e3779b97f4a7c15ull * (uint64_t)(wa->idx + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    rng = (z ^ (z >> 31)) | 1;

    struct request *slots = calloc((size_t)opt.batch, sizeof *slots);
    struct request **batch = calloc((size_t)opt.batch, sizeof *batch);
    struct request **next = calloc((size_t)opt.batch, sizeof *next);
    int *drafted = calloc((size_t)opt.batch, sizeof *drafted);
    if (!slots || !batch || !next || !drafted) { perror("calloc"); exit(1); }
    for (int i = 0; i < opt.batch; i++) batch[i] = &slots[i];

    pthread_mutex_lock(&gate_mu);
    while (!gate_open) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);

    int n = 0;
    for (;;) {
        // Keep the batch full: batch[n..] point at free slots (see the compaction below).
        while (n < opt.batch) {
            int id = claim_request();
            if (!id) break;
            struct request *r = batch[n++];
            memset(r, 0, sizeof *r);
            snprintf(r->id, sizeof r->id, "req-%06d", id);
            r->state = (uint64_t)id * 0x9e3779b97f4a7c15ull;
        }
        if (n == 0) break;

        uint64_t t0, t1;
        for (int i = 0; i < n; i++) {
            t0 = now_ns(CLOCK_REALTIME);
            drafted[i] = demo_draft(batch[i], opt.draft_len);
            t1 = now_ns(CLOCK_REALTIME);
            log_stage("draft", t0, t1, &batch[i], 1, "num_drafts", drafted[i]);
            st->drafts += drafted[i];
        }
        t0 = now_ns(CLOCK_REALTIME);
        demo_verify(batch, n);
        t1 = now_ns(CLOCK_REALTIME);
        log_stage("verify", t0, t1, batch, n, NULL, 0);
        for (int i = 0; i < n; i++) {
            // Each draft token survives with p=0.7 until the first rejection (geometric-ish).
            int acc = 0;
            while (acc < drafted[i] && xorshift() % 1000 < 700) acc++;
            t0 = now_ns(CLOCK_REALTIME);
            demo_accept(batch[i], acc);
            t1 = now_ns(CLOCK_REALTIME);
            log_stage("accept", t0, t1, &batch[i], 1, "num_correct_drafts", acc);
            st->accepted += acc;
            batch[i]->tokens += acc + 1;  // accepted drafts plus the bonus token from the target
        }
        t0 = now_ns(CLOCK_REALTIME);
        demo_draft_extend(batch, n);
        t1 = now_ns(CLOCK_REALTIME);
        log_stage("draft_extend", t0, t1, batch, n, NULL, 0);
        st->steps++;

        // Finished requests leave after the step: live ones keep their order at the front, the
        // free slots (finished ones and those never filled) go to the back for the refill.
        int kept = 0, free_at = opt.batch;
        for (int i = 0; i < opt.batch; i++) {
            if (i < n && batch[i]->tokens < opt.max_tokens) { next[kept++] = batch[i]; continue; }
            if (i < n) st->done++;
            next[--free_at] = batch[i];
        }
        memcpy(batch, next, (size_t)opt.batch * sizeof *batch);
        n = kept;
        if (atomic_load(&stopping)) break;  // finish the current step, then leave
    }
    free(slots); free(batch); free(next); free(drafted);
    return NULL;
}

static void open_gate(void) {
    pthread_mutex_lock(&gate_mu);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

// All signals we care about are blocked everywhere and taken here synchronously, so workers never
// see EINTR and nothing runs in a signal handler.
static void *signal_thread(void *arg) {
    sigset_t *set = arg;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0) continue;
        if (sig == SIGTERM || sig == SIGINT) atomic_store(&stopping, 1);
        open_gate();  // SIGUSR1 starts serving; a stop before start lets workers exit at once
    }
    return NULL;
}

static int parse_int(const char *name, const char *s, int min) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > 1000000) {
        fprintf(stderr, "specdemo: --%s wants an integer >= %d, got '%s'\n", name, min, s);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"threads", 1, 0, 't'}, {"batch", 1, 0, 'b'}, {"requests", 1, 0, 'n'},
        {"max-tokens", 1, 0, 'm'}, {"draft-len", 1, 0, 'k'}, {"seed", 1, 0, 's'},
        {"log", 1, 0, 'l'}, {"wait-signal", 0, 0, 'w'}, {"crash-in-verify", 1, 0, 'c'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 't': opt.threads = parse_int("threads", optarg, 1); break;
        case 'b': opt.batch = parse_int("batch", optarg, 1); break;
        case 'n': opt.requests = parse_int("requests", optarg, 0); break;
        case 'm': opt.max_tokens = parse_int("max-tokens", optarg, 1); break;
        case 'k': opt.draft_len = parse_int("draft-len", optarg, 1); break;
        case 's': opt.seed = strtoull(optarg, NULL, 0); break;
        case 'l': opt.log = optarg; break;
        case 'w': opt.wait_signal = 1; break;
        case 'c': opt.crash_step = parse_int("crash-in-verify", optarg, 1); break;
        default:
            fprintf(stderr, "usage: %s [--threads T] [--batch B] [--requests N] [--max-tokens M]\n"
                            "  [--draft-len K] [--seed S] [--log FILE] [--wait-signal]"
                            " [--crash-in-verify STEP]\n", argv[0]);
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind < argc) { fprintf(stderr, "specdemo: unexpected argument '%s'\n", argv[optind]); return 2; }
    if (opt.log && !(logf = fopen(opt.log, "w"))) { perror(opt.log); return 2; }

    // Block before creating any thread so every thread inherits the mask.
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1); sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t sig_tid;
    if (pthread_create(&sig_tid, NULL, signal_thread, &set) != 0) { perror("pthread_create"); return 1; }

    struct worker_arg *wa = calloc((size_t)opt.threads, sizeof *wa);
    pthread_t *tids = calloc((size_t)opt.threads, sizeof *tids);
    if (!wa || !tids) { perror("calloc"); return 1; }
    for (int i = 0; i < opt.threads; i++) {
        wa[i].idx = i;
        wa[i].seed = opt.seed;
        if (pthread_create(&tids[i], NULL, worker, &wa[i]) != 0) { perror("pthread_create"); return 1; }
    }
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    if (!opt.wait_signal) open_gate();

    struct stats tot = {0, 0, 0, 0};
    for (int i = 0; i < opt.threads; i++) {
        pthread_join(tids[i], NULL);
        tot.done += wa[i].st.done; tot.steps += wa[i].st.steps;
        tot.drafts += wa[i].st.drafts; tot.accepted += wa[i].st.accepted;
    }
    if (logf && fclose(logf) != 0) perror(opt.log);
    fprintf(stderr, "specdemo: requests=%ld steps=%ld drafts=%ld accepted=%ld acceptance=%.3f\n",
            tot.done, tot.steps, tot.drafts, tot.accepted,
            tot.drafts ? (double)tot.accepted / (double)tot.drafts : 0.0);
    return 0;  // exit() ends the signal thread, still parked in sigwait
}
