"""A speculative-decoding loop on CUDA for the GPU check (scripts/gpu-e2e.sh).

A batch of request objects (rid strings) goes through draft / verify /
draft_extend on a Worker, doing real bf16 matmuls. --mode synced: verify ends
with a .tolist() of its own result. --mode overlapped: verify reads the
acceptance of a small kernel first, then launches its big matmuls and returns
before they finish; the next call that waits pays for them.

Every stage call is logged as one JSON line: stage, thread, rids, accepted
counts, host start/end (CLOCK_MONOTONIC ns), GPU time (CUDA events, ms),
launches issued where the stand-in knows them, and the time blocked in the
.tolist()/synchronize (host clock around it).

--dry-run (or torch without CUDA) uses a CPU stand-in: launches return at
once and a sync sleeps until the work queued on a virtual GPU is done.
Standard library only in that mode.
"""
import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time

mono = time.clock_gettime_ns
CLOCK = time.CLOCK_MONOTONIC


class FakeGPU:
    """Launches queue work on a virtual GPU; a sync sleeps until it is done."""

    def __init__(self, kernel_us):
        self.busy_until = 0
        self.kernel_ns = int(kernel_us * 1000)
        self.launches = 0

    def matmul(self, n=1):
        now = mono(CLOCK)
        self.busy_until = max(self.busy_until, now) + n * self.kernel_ns
        self.launches += n
        return self.busy_until

    def sync(self):
        wait = self.busy_until - mono(CLOCK)
        if wait > 0:
            time.sleep(wait / 1e9)


class Req:
    def __init__(self, rid):
        self.rid = rid


class Worker:
    def __init__(self, a):
        self.a, self.k = a, a.draft_len
        self.log = []
        self.pending = []  # overlapped: (call record, gpu-done) resolved later
        if a.dry_run:
            self.gpu = FakeGPU(a.kernel_us)
        else:
            import torch
            self.torch = torch
            d = a.dim
            self.x = torch.randn(a.batch * self.k, d, device="cuda", dtype=torch.bfloat16)
            self.w = torch.randn(d, d, device="cuda", dtype=torch.bfloat16) / d ** 0.5
            self.calibrate()

    def calibrate(self):
        """Repetitions so a step's GPU time is about --step-ms."""
        t = self.torch
        y = self.x
        for _ in range(5):
            y = y @ self.w
        t.cuda.synchronize()
        s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            y = y @ self.w
        e.record()
        e.synchronize()
        per = s.elapsed_time(e) / 20
        reps = max(3, round(self.a.step_ms / per))
        self.reps = {"draft": max(1, reps * 3 // 10), "verify": max(1, reps * 5 // 10),
                     "draft_extend": max(1, reps * 2 // 10)}
        print("calibrated: %.4f ms a matmul, reps %s" % (per, self.reps), flush=True)

    # --- the work of one stage ---
    def _work(self, stage, rec):
        if self.a.dry_run:
            n = {"draft": 3, "verify": 5, "draft_extend": 2}[stage]
            self.gpu.matmul(n)
            rec["launches"] = rec.get("launches", 0) + n
            return
        y = self.x
        for _ in range(self.reps[stage]):
            y = y @ self.w
        self.y = y

    def _acceptance(self, reqs, rec):
        """Accepted counts on the host from a .tolist(); the time blocked there."""
        t0 = mono(CLOCK)
        if self.a.dry_run:
            self.gpu.matmul(1)
            rec["launches"] = rec.get("launches", 0) + 1
            self.gpu.sync()
            self.step_no = getattr(self, "step_no", 0) + 1
            acc = [(hash(r.rid) + self.step_no) % (self.k + 1) for r in reqs]
        else:
            v = self.y[: len(reqs), 0].float()
            acc = ((v.abs() * 1000).long() % (self.k + 1)).tolist()
        rec["sync_ns"] = rec.get("sync_ns", 0) + mono(CLOCK) - t0
        return [int(x) for x in acc]

    def _begin(self, stage, reqs):
        rec = {"stage": stage, "tid": threading.get_native_id(), "rids": [r.rid for r in reqs],
               "start_ns": mono(CLOCK)}
        if not self.a.dry_run:
            ev = (self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True))
            ev[0].record()
            rec["_ev"] = ev
        return rec

    def _end(self, rec):
        if self.a.dry_run:
            rec["gpu_ms"] = rec.get("launches", 0) * self.a.kernel_us / 1000  # the virtual GPU's time
        else:
            rec["_ev"][1].record()
        rec["end_ns"] = mono(CLOCK)
        self.log.append(rec)

    def draft(self, reqs):
        rec = self._begin("draft", reqs)
        self._work("draft", rec)
        self._end(rec)

    def verify(self, reqs):
        rec = self._begin("verify", reqs)
        if self.a.mode == "synced":
            self._work("verify", rec)
            acc = self._acceptance(reqs, rec)
        else:  # overlapped: counts from what is queued so far, then the big work, not waited for
            acc = self._acceptance(reqs, rec)
            self._work("verify", rec)
        rec["accepted"] = acc
        self._end(rec)
        return acc

    def draft_extend(self, reqs):
        rec = self._begin("draft_extend", reqs)
        self._work("draft_extend", rec)
        self._end(rec)

    def finish(self):
        """GPU times from the events, once everything is done."""
        if self.a.dry_run:
            self.gpu.sync()
        else:
            self.torch.cuda.synchronize()
        for rec in self.log:
            ev = rec.pop("_ev", None)
            if ev is not None:
                rec["gpu_ms"] = ev[0].elapsed_time(ev[1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["synced", "overlapped"], default="synced")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--draft-len", type=int, default=4)
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--step-ms", type=float, default=1.5)
    p.add_argument("--kernel-us", type=float, default=150, help="dry run: one stand-in kernel")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--log", default="")
    p.add_argument("--wait-signal", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args()
    if a.wait_signal:
        # Before torch starts threads: they inherit the mask, so SIGUSR1 can
        # only be taken by sigwait, never kill the process on another thread.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    if not a.dry_run:
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError("no CUDA")
        except ImportError as e:
            print("no torch with CUDA (%s): dry run" % e, flush=True)
            a.dry_run = True
    w = Worker(a)
    print("ready pid=%d" % os.getpid(), flush=True)
    if a.wait_signal:
        signal.sigwait({signal.SIGUSR1})
    reqs = [Req("req-%04d" % i) for i in range(a.batch)]
    steps = []
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        t0 = mono(CLOCK)
        w.draft(reqs)
        w.verify(reqs)
        w.draft_extend(reqs)
        steps.append(mono(CLOCK) - t0)
    w.finish()
    if a.log:
        with open(a.log, "w") as f:
            for rec in w.log:
                f.write(json.dumps(rec) + "\n")
    med = statistics.median(steps) / 1e6
    p99 = sorted(steps)[int(0.99 * (len(steps) - 1))] / 1e6
    print("steps %d median %.4f ms p99 %.4f ms mode %s dry_run %s" % (len(steps), med, p99, a.mode, a.dry_run), flush=True)


if __name__ == "__main__":
    sys.exit(main())
