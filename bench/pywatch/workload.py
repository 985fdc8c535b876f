# The Python workload of `make bench` (bench/pywatch): a tight loop of small
# calls that have nothing to do with the stage (unrelated(i)), and after every
# EVERY of them one call of stage(), which does a little work, as a stage
# method does between many other calls of an engine. It runs for DURATION
# seconds each time it reads "go MODE" and prints what it did:
#
#   unrelated <calls> unrelated_ns <ns> stages <calls> stage_ns <ns> wall_ns <ns>
#
# stage_ns is the time inside the stage calls (measured around each one, the
# same way in every mode); unrelated_ns is the rest of the loop. It exits when
# its stdin closes.
#
# usage: workload.py DURATION EVERY CPU   (CPU: pin the process there; -1: don't)
#   MODE  plain: call stage() bare; plain:N with a batch of N requests
#         (default 32);
#         raise: each unrelated call catches an exception raised through
#         the frame of a function it calls;
#         span: wrap each stage() call in a minimal in-process span record,
#         what a tracer inside the engine does today.
#
# stage(batch) takes a list of requests, each with a str rid (a uuid's hex),
# as an engine's batch holds them: what specprobe reads at its return.
import os
import sys
from time import perf_counter_ns


def unrelated(x):
    return x + 1


def raising(x):
    raise KeyError(x)


def catching(x):
    # The exception goes through raising's frame: on 3.10 and 3.11 the
    # traceback keeps that frame past its return, where specprobe's
    # kept_return probe sits.
    try:
        raising(x)
    except KeyError:
        pass


class Req:
    def __init__(self, i):
        self.rid = "%032x" % (i * 2654435761)
        self.n = i


def stage(batch):
    total = 0
    for r in batch:
        total += r.n * r.n
    return total


class Span:
    """A tracer's span record, as small as one gets: name, attributes,
    start and end times; finished spans go to a list an exporter would drain."""

    __slots__ = ("name", "attributes", "start_ns", "end_ns")

    def __init__(self, name, attributes):
        self.name = name
        self.attributes = attributes
        self.start_ns = perf_counter_ns()
        self.end_ns = 0

    def end(self, finished):
        self.end_ns = perf_counter_ns()
        finished.append(self)


def run(mode, duration_ns, every):
    st = stage
    pc = perf_counter_ns
    mode, _, n = mode.partition(":")
    f = catching if mode == "raise" else unrelated
    batch = [Req(i) for i in range(int(n or 32))]
    finished = []
    calls = stages = stage_ns = 0
    start = pc()
    end = start + duration_ns
    if mode in ("plain", "raise"):
        while True:
            for i in range(every):
                f(i)
            t0 = pc()
            st(batch)
            t1 = pc()
            stage_ns += t1 - t0
            calls += every
            stages += 1
            if t1 >= end:
                break
    elif mode == "span":
        while True:
            for i in range(every):
                f(i)
            t0 = pc()
            span = Span("stage", {"batch.size": len(batch)})
            span.attributes["result"] = st(batch)
            span.end(finished)
            if len(finished) >= 512:
                finished.clear()  # the exporter's batch went out
            t1 = pc()
            stage_ns += t1 - t0
            calls += every
            stages += 1
            if t1 >= end:
                break
    else:
        sys.exit(f"workload.py: unknown mode {mode!r} (plain, raise or span)")
    wall = t1 - start
    return calls, wall - stage_ns, stages, stage_ns, wall


def main():
    duration, every, cpu = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    if cpu >= 0:
        os.sched_setaffinity(0, {cpu})
    for mode in ("plain", "raise", "span"):
        run(mode, 100_000_000, every)  # warm up: the interpreter specializes the loops
    print("ready", flush=True)
    # One measurement per "go MODE" line, until stdin closes (the caller
    # detaches first: interpreter shutdown frees stage's function and code
    # object, writes a watchpoint would see while still armed).
    for line in sys.stdin:
        word, mode = line.split()
        if word != "go":
            sys.exit(f"workload.py: expected go MODE, got {line!r}")
        calls, unrelated_ns, stages, stage_ns, wall = run(mode, int(duration * 1e9), every)
        print(f"unrelated {calls} unrelated_ns {unrelated_ns} stages {stages} stage_ns {stage_ns} wall_ns {wall}", flush=True)


main()
