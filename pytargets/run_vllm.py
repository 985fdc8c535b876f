#!/usr/bin/env python3
"""Entry point: a vLLM-shaped speculative-decoding engine loop, test target for specprobe. One
process, one thread: EngineCore.step() drives Scheduler and a GPUModelRunner (Model Runner V2 by
default, or the V1 runner) over --requests requests, writing a ground-truth log (--log). See
README.md."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _entry  # noqa: E402

# --speculator: the speculative method, and what else of the config picks the speculator
# (the draft's architecture for DFlash's variants, ngram_lookup for n-gram MTP).
SPECULATORS = {"eagle": ("eagle", {}), "mtp": ("mtp", {}), "gemma4": ("gemma4_mtp", {}),
               "dflash": ("dflash", {}), "dspark": ("dspark", {}),
               "multi_module_mtp": ("multi_module_mtp", {}),
               "dflash2": ("dflash", {"architectures": ["DFlash2DraftModel"]}),
               "lilicorr": ("dflash", {"architectures": ["LiLiCorrDraftModel"]}),
               "ngram_mtp": ("mtp", {"ngram_lookup": True}),
               "standalone": ("draft_model", {}), "ngram_gpu": ("ngram_gpu", {})}


def make_runner(args):
    """The model runner and its batch order (the ground truth's order of a verify's requests)."""
    from vllm.config import DraftModelConfig, SpeculativeConfig, VllmConfig
    method, extra = SPECULATORS[args.speculator]
    spec = SpeculativeConfig(method, args.draft_len,
                             draft_model_config=DraftModelConfig(extra.get("architectures", [])),
                             ngram_lookup=extra.get("ngram_lookup", False))
    cfg = VllmConfig(spec,
                     max_num_seqs=args.max_batch, accept_p=args.accept_p, seed=args.seed,
                     sampled_per_step=args.sampled_per_step)
    order = None
    if args.runner == "v1":
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    else:
        from vllm.v1.worker.gpu.model_runner import GPUModelRunner, sort_batch_req_ids

        def order(so):
            return sort_batch_req_ids(so.num_scheduled_tokens, so.scheduled_spec_decode_tokens,
                                      1 + args.draft_len)
    runner = GPUModelRunner(cfg)
    runner._dummy_run(16, is_profile=True)   # memory profiling at start-up, as upstream
    return runner, order


def worker_argv(argv):
    """run_vllm.py's arguments for a TP worker: the same, without --tp; its log is LOG.tp<r>
    (added by the worker itself)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--tp":
            skip = True
            continue
        if a.startswith("--tp="):
            continue
        out.append(a)
    return out


def make_core(args):
    if args.shape == "autumn2026":
        from vllm.v1.engine.core import EngineCore
        return EngineCore(args.requests, args.max_batch, args.draft_len, args.accept_p,
                          args.max_new_tokens, args.seed, args.noise_calls)
    from vllm.v1.engine.core import EngineCore
    if args.tp > 1:
        import _vllm_tp
        runner = _vllm_tp.RemoteRunner(args.tp, worker_argv(sys.argv[1:]))
        # The workers log their verifies; EngineCore only what runs in it.
        return EngineCore(runner, args.requests, args.max_batch, args.draft_len, args.max_new_tokens,
                          args.seed, args.noise_calls, dummy_every=args.dummy_every, log_verify=False,
                          sampled_per_step=args.sampled_per_step)
    runner, order = make_runner(args)
    return EngineCore(runner, args.requests, args.max_batch, args.draft_len, args.max_new_tokens,
                      args.seed, args.noise_calls, dummy_every=args.dummy_every, order=order,
                      sampled_per_step=args.sampled_per_step)


def tp_worker(args):
    """A TP worker process: the runner, serving EngineCore's calls."""
    import _vllm_tp
    if args.log:
        args.log = "%s.tp%d" % (args.log, args.tp_worker)
    runner, order = make_runner(args)
    stopper, log = _entry.start(args, "run_vllm worker TP%d" % args.tp_worker, "vllm")
    _vllm_tp.serve(runner, args.tp_fds, order)
    _entry.finish(log, "run_vllm worker TP%d" % args.tp_worker, {"rank": args.tp_worker})
    return 0


def _title():
    with open("/proc/self/cmdline", "rb") as f:
        return f.read().split(b"\0")[0].decode()


def _interpreter():
    # Not sys.executable: a process whose argv[0] is a title has none.
    return os.readlink("/proc/self/exe")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runner", choices=("v2", "v1"), default="v2",
                   help="Model Runner V2 (vllm/v1/worker/gpu/, the default for dense models) or the"
                        " V1 GPUModelRunner (vllm/v1/worker/gpu_model_runner.py)")
    p.add_argument("--speculator", choices=sorted(SPECULATORS), default="eagle",
                   help="Model Runner V2's speculator")
    p.add_argument("--dummy-every", type=int, default=0, metavar="N",
                   help="every N steps, also a dummy run (as an idle data-parallel rank makes)")
    p.add_argument("--sampled-per-step", type=int, default=1, metavar="N",
                   help="tokens each step samples besides the accepted drafts (the scheduler's"
                        " num_sampled_tokens_per_step; 1 for a plain LLM)")
    p.add_argument("--tp", type=int, default=1,
                   help="TP ranks: with more than 1, EngineCore runs here and the runner in one"
                        " worker process per rank (_vllm_tp.py)")
    p.add_argument("--tp-worker", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--tp-fds", default="", help=argparse.SUPPRESS)
    _entry.add_common_args(p)
    args = p.parse_args(argv)
    if args.shape == "autumn2026" and (args.runner != "v2" or args.speculator != "eagle" or args.dummy_every
                                       or args.sampled_per_step != 1):
        p.error("the autumn2026 shape has Model Runner V2 with EAGLE only, no dummy runs and one"
                " token sampled per step")
    if args.sampled_per_step < 1:
        p.error("--sampled-per-step: at least 1")
    if args.tp > 1 and args.shape == "autumn2026":
        p.error("--tp goes with today's shape")
    if args.tp > 1 and args.tp_worker < 0 and _title() != "VLLM::EngineCore":
        # Titled as vLLM's EngineCore process is (setproctitle): the first word of its
        # command line, which is what specprobe reads.
        os.execv(_interpreter(), ["VLLM::EngineCore", os.path.abspath(__file__)] + sys.argv[1:])
    _entry.setup_path(args.shape)
    if args.tp_worker >= 0:
        return tp_worker(args)

    core = make_core(args)
    runner_cls = type(core.model_runner)
    stopper, log = _entry.start(args, "run_vllm", "vllm")
    t0 = time.monotonic()
    while not stopper() and not core.done():
        if args.read_code:
            n = 0
            for _ in range(3):
                # The watched code object is behind the inference_mode wrapper.
                n += runner_cls.execute_model.__wrapped__.__code__.co_argcount
            log.event("read_code", step=core.step_ct, count=3,
                      method="GPUModelRunner.execute_model")
        core.step()
    wall = time.monotonic() - t0
    if args.tp > 1:
        core.model_runner.close()
    st = core.scheduler.spec_decoding_stats
    _entry.finish(log, "run_vllm", {
        "shape": args.shape, "runner": getattr(args, "runner", "v2"), "speculator": args.speculator,
        "finished": core.scheduler.num_finished, "requests": args.requests,
        "steps": core.step_ct, "stopped": stopper.stop, "wall_s": round(wall, 3),
        "num_drafts": st.num_drafts, "accepted": st.num_accepted_tokens,
        "draft_tokens": st.num_draft_tokens,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
