# A speculative-decoding loop written as a user's own server might be, not
# shaped after any engine: requests join and leave a running batch, each step
# drafts, checks the drafts and (prefills aside) extends. specprobe traces it
# from a spec written from docs/probe-spec.md alone (integration/exact_test.go).
#
#   engine.py LOG --batch B --stage-us U --steps S [--late] [--fork] [--threads T]
#
# --late: the accepted counts reach the host one step later, in resolve()
# (as an overlap scheduler does); otherwise check() returns them.
# --fork: a child process is forked after attach and runs the same stages,
# once SIGUSR2 says so.
# --threads: T threads each run their own loop (their own requests).
# --kwargs: the stages take parameters with defaults and are called by
# position, by keyword and through **kwargs in turn: draft() (a dummy call,
# dummy=True and not logged, each step) and Checker.check (prefill=True by
# keyword for a prefill, left to its default when decoding).
#
# The log (JSON lines) says what really happened: every stage call with its
# thread, its interval (time.time_ns() around the call) and the ids of the
# requests it served, and every request's accepted count per step.
import argparse
import dataclasses
import json
import os
import random
import signal
import threading
import time
import uuid


class Request:
    def __init__(self, rid, length):
        self.rid = rid
        self.remaining = length
        self.verifies = 0
        self.accepted_total = 0


@dataclasses.dataclass
class Batch:
    requests: list
    mode: int  # 1 prefill, 2 decode


def spin(us):
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass


class Drafter:
    def __init__(self, us):
        self.us = us

    def propose(self, batch):
        spin(self.us)
        return [4] * len(batch.requests)


class Checker:
    def __init__(self, us, rng):
        self.us, self.rng = us, rng

    def check(self, batch, drafts, *, prefill=False):
        spin(self.us)
        out = []
        for r, k in zip(batch.requests, drafts):
            n = 0
            while n < k and self.rng.random() < 0.7:
                n += 1
            out.append(n)
        return out


def draft(batch, k=4, us=0, dummy=False):
    spin(us)
    return [k] * len(batch.requests)


def resolve(batch, counts):
    for r, n in zip(batch.requests, counts):
        r.verifies += 1
        r.accepted_total += n


class Loop:
    def __init__(self, args, log, lock, seed):
        self.args, self.log, self.lock = args, log, lock
        self.rng = random.Random(seed)
        self.drafter = Drafter(args.stage_us)
        self.checker = Checker(args.stage_us, random.Random(seed + 1))

    def write(self, **kw):
        line = json.dumps(kw)
        with self.lock:
            self.log.write(line + "\n")

    def timed(self, stage, fn, batch, *a):
        tid = threading.get_native_id()
        start = time.time_ns()
        out = fn(batch, *a)
        end = time.time_ns()
        self.write(stage=stage, tid=tid, start_ns=start, end_ns=end, pid=os.getpid(),
                   rids=[r.rid for r in batch.requests], mode=batch.mode)
        return out

    def logged(self, stage, batch, start):
        self.write(stage=stage, tid=threading.get_native_id(), start_ns=start, end_ns=time.time_ns(),
                   pid=os.getpid(), rids=[r.rid for r in batch.requests], mode=batch.mode)

    def kwargs_step(self, step, batch):
        us = self.args.stage_us
        draft(Batch(batch.requests[:1], 2), 1, us, dummy=True)  # a dummy run: when leaves it out
        t = time.time_ns()
        if step % 3 == 0:
            drafts = draft(batch, 4, us)                  # CALL_FUNCTION, dummy left to its default
        elif step % 3 == 1:
            drafts = draft(batch=batch, us=us, k=4)       # CALL_FUNCTION_KW
        else:
            drafts = draft(**{"batch": batch, "us": us})  # CALL_FUNCTION_EX with a dict
        self.logged("draft", batch, t)
        t = time.time_ns()
        if step % 3 == 0:
            counts = self.checker.check(batch, drafts)    # CALL_METHOD, keyword-only default
        elif step % 3 == 1:
            counts = self.checker.check(batch, drafts=drafts)  # a bound method's CALL_FUNCTION_KW
        else:
            counts = Checker.check(self.checker, drafts=drafts, batch=batch)  # CALL_FUNCTION_KW
        self.logged("verify", batch, t)
        return drafts, counts

    def run(self):
        a = self.args
        running, pending = [], None
        for step in range(a.steps):
            joining = [Request(uuid.UUID(int=self.rng.getrandbits(128)).hex, self.rng.randint(3, 12))
                       for _ in range(self.rng.randint(0, max(1, a.batch // 4)))]
            joining = joining[:max(0, a.batch - len(running))]
            if joining and a.kwargs and step % 2:
                Checker.check(self.checker, Batch(joining, 1), [0] * len(joining), prefill=True)
            elif joining and a.kwargs:
                self.checker.check(Batch(joining, 1), [0] * len(joining), prefill=True)
            elif joining:
                self.timed("verify", self.checker.check, Batch(joining, 1), [0] * len(joining))
            running += joining
            if not running:
                continue
            batch = Batch(list(running), 2)
            if a.kwargs:
                drafts, counts = self.kwargs_step(step, batch)
            else:
                drafts = self.timed("draft", self.drafter.propose, batch)
                counts = self.timed("verify", self.checker.check, batch, drafts)
            self.write(stage="accept", step=step, rids=[r.rid for r in batch.requests],
                       num_correct_drafts=counts, tid=threading.get_native_id(), pid=os.getpid())
            if a.late:
                if pending:
                    resolve(*pending)
                pending = (batch, counts)
            else:
                resolve(batch, counts)
            for r, n in zip(batch.requests, counts):
                r.remaining -= n + 1
            running = [r for r in running if r.remaining > 0]
        if pending:
            resolve(*pending)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--stage-us", type=float, default=500)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--late", action="store_true")
    ap.add_argument("--fork", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--kwargs", action="store_true")
    args = ap.parse_args()
    # Blocked before the fork: the child inherits the mask and waits for SIGUSR2.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGUSR2})
    print("ready", flush=True)
    signal.sigwait({signal.SIGUSR1})
    child = 0
    if args.fork:
        child = os.fork()
        if child == 0:
            # Parked until the test has looked at its debug registers.
            signal.sigwait({signal.SIGUSR2})
    name = args.log + (".child" if child == 0 and args.fork else "")
    with open(name, "w") as log:
        lock = threading.Lock()
        seed = 7 if child else 8
        loops = [Loop(args, log, lock, seed + 10 * i) for i in range(args.threads)]
        ts = [threading.Thread(target=l.run) for l in loops[1:]]
        for t in ts:
            t.start()
        loops[0].run()
        for t in ts:
            t.join()
    if args.fork and child:
        os.waitpid(child, 0)
    if args.fork and not child:
        os._exit(0)


main()
