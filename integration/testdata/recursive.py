# A stage that calls itself: each top-level stage(batch, 1) runs a nested
# stage(batch, 0) between two stretches of work. The caller of each call logs
# it (pytargets' ground-truth format: stage, tid, start_ns, end_ns, rids,
# plus depth), so every span must fall inside its call's window.
import json
import signal
import sys
import threading
import time


class Req:
    def __init__(self, rid):
        self.rid = rid


class Batch:
    def __init__(self, reqs):
        self.reqs = reqs


def spin(ns):
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def timed(batch, depth):
    start = time.time_ns()
    stage(batch, depth)
    end = time.time_ns()
    log.write(json.dumps({"stage": "verify", "tid": threading.get_native_id(), "start_ns": start,
                          "end_ns": end, "rids": [r.rid for r in batch.reqs], "depth": depth}) + "\n")


def stage(batch, depth):
    spin(1_000_000)
    if depth > 0:
        timed(batch, depth - 1)
        spin(1_000_000)


calls, path = int(sys.argv[1]), sys.argv[2]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
with open(path, "w") as log:
    for i in range(calls):
        timed(Batch([Req(f"call{i}-a"), Req(f"call{i}-b")]), 1)
