#!/usr/bin/env python3
"""Entry point: an SGLang-shaped speculative-decoding scheduler (test target for specprobe).

Runs one single-threaded Scheduler (event_loop_overlap by default) with the chosen spec-v2
worker over --requests requests, writing a ground-truth log (--log). See README.md."""
import argparse
import dataclasses
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _entry  # noqa: E402
import _realworld  # noqa: E402

# --worker -> (algorithm, extra ServerArgs) for today's shape; the autumn-2026 shape has the
# first five, with its own algorithm names.
WORKERS = {
    "eagle_v2": ("EAGLE", {}),
    "frozen_kv_mtp": ("FROZEN_KV_MTP", {}),
    "standalone": ("STANDALONE", {}),
    "multi_layer_eagle": ("EAGLE", {"enable_multi_layer_eagle": True}),
    "ngram": ("NGRAM", {}),
    "hybrid": ("HYBRID", {"speculative_hybrid_config":
                          '{"retrieval": {"algorithm": "NGRAM"}, "neural": {"algorithm": "EAGLE"}}'}),
    "uno": ("UNO", {}),
    "dflash": ("DFLASH", {}),
    "dspark": ("DSPARK", {}),
    "plugin": ("ACME", {}),
}
AUTUMN_WORKERS = {"eagle_v2": "EAGLE", "frozen_kv_mtp": "FROZEN_KV_MTP", "standalone": "STANDALONE",
                  "multi_layer_eagle": "MULTI_LAYER_EAGLE", "ngram": "NGRAM"}


def make_worker(args, server_args):
    """Create the worker as the scheduler does (its module is imported only now)."""
    from sglang.srt.managers.tp_worker import TpModelWorker
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    target = TpModelWorker(server_args, args.seed)
    if args.worker_delay:
        time.sleep(args.worker_delay)
    if args.worker_signal:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
        sys.stdout.write("loading pid=%d\n" % os.getpid())
        sys.stdout.flush()
        signal.sigwait({signal.SIGUSR2})
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR2})
    algo = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
    if args.shape == "autumn2026":
        return algo.create_worker(server_args, target)
    cls = algo.create_worker(server_args)
    if algo.is_hybrid():   # the #37237 branch's workers still take ps; main's do not
        from sglang.srt.distributed.parallel_state_wrapper import ParallelState
        return cls(server_args=server_args, gpu_id=0, ps=ParallelState(), nccl_port=0,
                   target_worker=target)
    return cls(server_args=server_args, gpu_id=0, nccl_port=0, target_worker=target)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", choices=sorted(WORKERS), default="eagle_v2")
    p.add_argument("--replace-code", type=int, default=0, metavar="K",
                   help="at loop iteration K, replace EAGLEWorkerV2.verify with a function of the same"
                        " name on a new code object (as a reload would); the old one is freed")
    p.add_argument("--worker-delay", type=float, default=0, metavar="S",
                   help="wait S seconds after importing the stack before creating the worker (and"
                        " importing its module), as a server loading its model would")
    p.add_argument("--worker-signal", action="store_true",
                   help="print 'loading pid=N', then block until SIGUSR2 before creating the worker (and"
                        " importing its module): a server loading its model for as long as a test wants")
    p.add_argument("--disable-overlap", action="store_true",
                   help="event_loop_normal: accept counts resolve in the same step")
    p.add_argument("--pp-tail-draft", action="store_true",
                   help="as the last stage of pipeline parallelism: draft the next round at the end of"
                        " each decode step (draft(batch, with_topology=True)), verify without drafting")
    p.add_argument("--dp-prefill-coordination", action="store_true",
                   help="SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION: each prefill step drafts an empty"
                        " idle batch first")
    _entry.add_common_args(p)
    args = p.parse_args(argv)
    if args.shape == "autumn2026" and args.worker not in AUTUMN_WORKERS:
        p.error("--worker %s has no autumn2026 shape (it has: %s)" % (args.worker, ", ".join(sorted(AUTUMN_WORKERS))))
    if args.shape == "autumn2026" and (args.pp_tail_draft or args.dp_prefill_coordination):
        p.error("--pp-tail-draft and --dp-prefill-coordination are today's shapes only")
    _entry.setup_path(args.shape)

    # Import the stack before "ready", as a server would. The autumn-2026 stack imported EAGLE
    # V2's module whatever the worker; today's imports a worker's module only when it is created.
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.server_args import ServerArgs
    if args.shape == "autumn2026":
        import sglang.srt.speculative.eagle_worker_v2  # noqa: F401
    if args.worker == "plugin":
        import acme_spec  # noqa: F401  (a plugin registers itself, as load_plugins() would run it)

    algorithm, extra = WORKERS[args.worker]
    if args.shape == "autumn2026":
        algorithm, extra = AUTUMN_WORKERS[args.worker], {}
    server_args = ServerArgs(
        speculative_algorithm=algorithm,
        speculative_num_steps=args.draft_len,
        speculative_num_draft_tokens=args.draft_len + 1,
        speculative_accept_p=args.accept_p,
        max_running_requests=args.max_batch,
        max_new_tokens=args.max_new_tokens,
        disable_overlap_schedule=args.disable_overlap,
        random_seed=args.seed,
        noise_calls=args.noise_calls,
    )
    if args.pp_tail_draft or args.dp_prefill_coordination:  # today's shape only
        extra = dict(extra, pp_size=2 if args.pp_tail_draft else 1,
                     enable_dp_spec_prefill_coordination=args.dp_prefill_coordination)
    server_args = dataclasses.replace(server_args, **extra)
    worker = make_worker(args, server_args)

    stopper, log = _entry.start(args, "run_sglang", "sglang")
    on_iteration = None
    if args.replace_code or args.read_code or args.real_world:
        from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
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
        def on_iteration(sched):
            # Touch the verify code object from another instruction pointer (a profiler or a
            # debugger might): each read is an extra +1/-1 pair on its refcount.
            n = 0
            for _ in range(3):
                n += EAGLEWorkerV2.verify.__code__.co_argcount
            log.event("read_code", step=sched.forward_ct, count=3, method="EAGLEWorkerV2.verify")

    if args.real_world:
        from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker
        then = on_iteration

        def on_iteration(sched):
            _realworld.around([EagleDraftWorker.draft, EAGLEWorkerV2.verify])
            if then:
                then(sched)
    sched = Scheduler(server_args, worker, args.requests, should_stop=stopper,
                      on_iteration=on_iteration)
    t0 = time.monotonic()
    if sched.enable_overlap:
        sched.event_loop_overlap()
    else:
        sched.event_loop_normal()
    wall = time.monotonic() - t0
    _entry.finish(log, "run_sglang", {
        "worker": args.worker, "shape": args.shape, "finished": sched.stats["finished"],
        "requests": args.requests, "steps": sched.forward_ct, "stopped": stopper.stop,
        "wall_s": round(wall, 3),
        "verify_complete_calls": getattr(worker, "verify_complete_calls", 0),
        "correct_drafts": getattr(worker, "total_correct_drafts", 0),
        **({"real_world": dict(_realworld.COUNTS)} if args.real_world else {}),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
