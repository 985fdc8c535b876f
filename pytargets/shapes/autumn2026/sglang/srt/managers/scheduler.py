"""Mirrors sglang/srt/managers/scheduler.py: a single-threaded scheduler per rank that runs every
stage on its main thread. event_loop_overlap launches step N+1 before the results of step N are
processed (so step N's accept counts resolve after step N+1's draft and verify ran);
event_loop_normal processes each step's results right after it.

Requests arrive over time (by loop iteration, from a seeded schedule), join the running batch
after their prefill, and leave it when finished: continuous batching, several at once.

In the real engine, requests come from the tokenizer manager over ZMQ; here the arrival
schedule stands in for that."""
import dataclasses
import time
from typing import Any, List, Optional

from _groundtruth import truth
from _sglang_loop import SchedulerLoop, make_rid  # noqa: F401
from sglang.srt.managers.schedule_batch import ForwardMode, Req, SamplingParams, ScheduleBatch
from sglang.srt.managers.scheduler_components.batch_result_processor import (
    SchedulerBatchResultProcessor,
)


@dataclasses.dataclass
class GenerationBatchResult:
    logits_output: Any = None
    next_token_ids: Optional[List[int]] = None
    accept_lens: Optional[List[int]] = None
    next_draft_input: Any = None
    speculative_num_draft_tokens: int = 1
    can_run_cuda_graph: bool = False
    forward_ct: int = 0          # test-only: the step whose verify produced this result
    num_correct_drafts: int = 0
    num_correct_drafts_per_req_cpu: Optional[List[int]] = None


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
        return ScheduleBatch(reqs=can_run, forward_mode=ForwardMode.EXTEND,
                             enable_overlap=self.enable_overlap)

    def run_batch(self, batch):
        self.forward_ct += 1
        model_worker_batch = batch.get_model_worker_batch(self.forward_ct)
        is_ngram_decode = batch.forward_mode.is_decode() and type(self.model_worker).__name__ == "NGRAMWorker"
        t0 = time.time_ns()
        result = self.model_worker.forward_batch_generation(model_worker_batch)
        t1 = time.time_ns()
        if batch.forward_mode.is_extend():
            truth().event("prefill", start_ns=t0, end_ns=t1, rids=[r.rid for r in batch.reqs],
                          step=self.forward_ct)
        elif is_ngram_decode:
            truth().stage("verify", t0, t1, model_worker_batch.reqs, self.forward_ct,
                          method="NGRAMWorker.forward_batch_generation")
        return result
