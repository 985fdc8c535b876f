"""Mirrors python/sglang/srt/managers/scheduler.py (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md): a
single-threaded scheduler per rank that runs every stage on its main thread. event_loop_overlap
launches step N+1 before the results of step N are processed (so step N's accept counts
resolve after step N+1's draft and verify ran); event_loop_normal processes each step's
results right after it. run_batch hands the ScheduleBatch itself to the worker's
forward_batch_generation(batch, on_publish=..., grammar_barrier=...).

Requests arrive over time (by loop iteration, from a seeded schedule), join the running batch
after their prefill, and leave it when finished. Upstream, requests come from the tokenizer
manager over ZMQ, and the process is titled sglang::scheduler[_DPn][_PPn][_TPn][_EPn]; the
pytargets process keeps its command line."""
import time

from _groundtruth import truth
from _sglang_loop import SchedulerLoop
from sglang.srt.managers.schedule_batch import Req, SamplingParams, ScheduleBatch
from sglang.srt.managers.scheduler_components.batch_result_processor import (
    SchedulerBatchResultProcessor,
)
from sglang.srt.managers.utils import GenerationBatchResult  # noqa: F401  (re-exported, as upstream)


class Scheduler(SchedulerLoop):
    def __init__(self, server_args, model_worker, num_requests, should_stop=lambda: False,
                 on_iteration=None):
        super().__init__(server_args, model_worker, num_requests, should_stop, on_iteration,
                         SchedulerBatchResultProcessor, ScheduleBatch, Req, SamplingParams)

    def get_new_batch_prefill(self):
        room = self.server_args.max_running_requests - len(self.running_batch.reqs)
        if room <= 0 or not self.waiting_queue:
            return None
        can_run, self.waiting_queue = self.waiting_queue[:room], self.waiting_queue[room:]
        batch = ScheduleBatch(reqs=can_run, enable_overlap=self.enable_overlap)
        batch.prepare_for_extend()
        return batch

    def run_batch(self, batch):
        self.forward_ct += 1
        batch.forward_ct = self.forward_ct
        decode = batch.forward_mode.is_decode()
        reqs = list(batch.reqs)
        # Workers whose verify is inline in forward_batch_generation (NGRAM, HYBRID, DFlash):
        # that call is the probe-able verify frame, timed here.
        frame = getattr(self.model_worker, "truth_verify_frame", None)
        t0 = time.time_ns()
        result = self.model_worker.forward_batch_generation(
            batch, on_publish=None, grammar_barrier=None)
        t1 = time.time_ns()
        if not decode:
            truth().event("prefill", start_ns=t0, end_ns=t1, rids=[r.rid for r in reqs],
                          step=self.forward_ct)
        elif frame is not None:
            truth().stage("verify", t0, t1, reqs, self.forward_ct, method=frame)
        return result
