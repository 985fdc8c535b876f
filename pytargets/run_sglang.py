#!/usr/bin/env python3
"""Entry point: an SGLang-shaped speculative-decoding scheduler (test target for specprobe).

Runs one single-threaded Scheduler (event_loop_overlap by default) with the chosen spec-v2
worker over --requests requests, writing a ground-truth log (--log). See README.md."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _entry  # noqa: E402

WORKERS = {
    "eagle_v2": "EAGLE",
    "frozen_kv_mtp": "FROZEN_KV_MTP",
    "standalone": "STANDALONE",
    "multi_layer_eagle": "MULTI_LAYER_EAGLE",
    "ngram": "NGRAM",
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", choices=sorted(WORKERS), default="eagle_v2")
    p.add_argument("--replace-code", type=int, default=0, metavar="K",
                   help="at loop iteration K, replace EAGLEWorkerV2.verify with a function of the same"
                        " name on a new code object (as a reload would); the old one is freed")
    p.add_argument("--worker-delay", type=float, default=0, metavar="S",
                   help="wait S seconds after importing the stack before creating the worker (and"
                        " importing its module), as a server loading its model would")
    p.add_argument("--disable-overlap", action="store_true",
                   help="event_loop_normal: accept counts resolve in the same step")
    _entry.add_common_args(p)
    args = p.parse_args(argv)
    _entry.setup_path()

    # Import the whole stack (and the worker's module) before "ready", as a server would.
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.managers.tp_worker import TpModelWorker
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    server_args = ServerArgs(
        speculative_algorithm=WORKERS[args.worker],
        speculative_num_steps=args.draft_len,
        speculative_num_draft_tokens=args.draft_len + 1,
        speculative_accept_p=args.accept_p,
        max_running_requests=args.max_batch,
        max_new_tokens=args.max_new_tokens,
        disable_overlap_schedule=args.disable_overlap,
        random_seed=args.seed,
        noise_calls=args.noise_calls,
    )
    target = TpModelWorker(server_args, args.seed)
    if args.worker_delay:
        time.sleep(args.worker_delay)
    worker = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm).create_worker(
        server_args, target)

    stopper, log = _entry.start(args, "run_sglang", "sglang")

    on_iteration = None
    if args.replace_code:
        iterations = [0]

        def on_iteration(sched):
            iterations[0] += 1
            if iterations[0] == args.replace_code:
                import types
                old = EAGLEWorkerV2.verify
                new = types.FunctionType(old.__code__.replace(), old.__globals__, old.__name__,
                                         old.__defaults__, old.__closure__)
                new.__qualname__ = old.__qualname__
                EAGLEWorkerV2.verify = new
                del old  # the class held the only reference: the old code is freed
                log.event("replace_code", step=sched.forward_ct, method="EAGLEWorkerV2.verify")
    if args.read_code:
        reads = [0]

        def on_iteration(sched):
            # Touch the verify code object from another instruction pointer (a profiler or a
            # debugger might): each read is an extra +1/-1 pair on its refcount.
            n = 0
            for _ in range(3):
                c = EAGLEWorkerV2.verify.__code__
                n += c.co_argcount
            reads[0] += 3
            log.event("read_code", step=sched.forward_ct, count=3,
                      method="EAGLEWorkerV2.verify")

    sched = Scheduler(server_args, worker, args.requests, should_stop=stopper,
                      on_iteration=on_iteration)
    t0 = time.monotonic()
    if sched.enable_overlap:
        sched.event_loop_overlap()
    else:
        sched.event_loop_normal()
    wall = time.monotonic() - t0
    _entry.finish(log, "run_sglang", {
        "worker": args.worker, "finished": sched.stats["finished"], "requests": args.requests,
        "steps": sched.forward_ct, "stopped": stopper.stop, "wall_s": round(wall, 3),
        "verify_complete_calls": getattr(worker, "verify_complete_calls", 0),
        "correct_drafts": getattr(worker, "total_correct_drafts", 0),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
