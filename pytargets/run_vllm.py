#!/usr/bin/env python3
"""Entry point: a vLLM-shaped (Model Runner V2) speculative-decoding engine loop, test target for
specprobe. One process, one thread: EngineCore.step() drives Scheduler and GPUModelRunner over
--requests requests, writing a ground-truth log (--log). See README.md."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _entry  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _entry.add_common_args(p)
    args = p.parse_args(argv)
    _entry.setup_path()

    from vllm.v1.engine.core import EngineCore
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner

    core = EngineCore(args.requests, args.max_batch, args.draft_len, args.accept_p,
                      args.max_new_tokens, args.seed, args.noise_calls)
    stopper, log = _entry.start(args, "run_vllm", "vllm")
    t0 = time.monotonic()
    while not stopper() and not core.done():
        if args.read_code:
            n = 0
            for _ in range(3):
                # The watched code object is behind the inference_mode wrapper.
                c = GPUModelRunner.execute_model.__wrapped__.__code__
                n += c.co_argcount
            log.event("read_code", step=core.step_ct, count=3,
                      method="GPUModelRunner.execute_model")
        core.step()
    wall = time.monotonic() - t0
    st = core.scheduler.spec_decoding_stats
    _entry.finish(log, "run_vllm", {
        "finished": core.scheduler.num_finished, "requests": args.requests,
        "steps": core.step_ct, "stopped": stopper.stop, "wall_s": round(wall, 3),
        "num_drafts": st.num_drafts, "accepted": st.num_accepted_tokens,
        "draft_tokens": st.num_draft_tokens,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
