"""Mirrors sglang/srt/managers/scheduler.py: a single-threaded scheduler per rank that runs every
stage on its main thread. event_loop_overlap launches step N+1 before the results of step N are
processed (so step N's accept counts resolve after step N+1's draft and verify ran);
event_loop_normal processes each step's results right after it.

Requests arrive over time (by loop iteration, from a seeded schedule), join the running batch
after their prefill, and leave it when finished: continuous batching, several at once.

In the real engine, requests come from the tokenizer manager over ZMQ; here the arrival
schedule stands in for that."""
import collections
import dataclasses
import random
import time
import uuid
from typing import Any, List, Optional

from _groundtruth import truth
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


def make_rid(rng):
    """A uuid4 hex rid (as SGLang's default), drawn from the seeded RNG for reproducibility."""
    return uuid.UUID(int=rng.getrandbits(128), version=4).hex


class Scheduler:
    def __init__(self, server_args, model_worker, num_requests, should_stop=lambda: False,
                 on_iteration=None):
        self.server_args = server_args
        self.model_worker = model_worker
        self.enable_overlap = not server_args.disable_overlap_schedule
        self.should_stop = should_stop
        self.on_iteration = on_iteration
        self.stats = {"finished": 0}
        self.batch_result_processor = SchedulerBatchResultProcessor(
            is_generation=True,
            enable_overlap=self.enable_overlap,
            server_args=server_args,
            model_worker=model_worker,
            stats=self.stats,
        )
        rng = random.Random(server_args.random_seed)
        self.arrivals = collections.deque()
        tick = 0
        for _ in range(num_requests):
            tick += rng.choice((0, 0, 1, 2, 3, 5))
            prompt = [rng.randrange(32000) for _ in range(rng.randint(4, 24))]
            max_new = rng.randint(server_args.max_new_tokens // 2, server_args.max_new_tokens)
            self.arrivals.append((tick, Req(make_rid(rng), prompt, SamplingParams(max_new))))
        self.num_requests = num_requests
        self.waiting_queue = []
        self.running_batch = ScheduleBatch(reqs=[], enable_overlap=self.enable_overlap)
        self.last_batch = None
        self.cur_batch = None
        self.result_queue = collections.deque()
        self.forward_ct = 0
        self.tick = 0

    # --- input -----------------------------------------------------------------------------
    def recv_requests(self):
        out = []
        while self.arrivals and self.arrivals[0][0] <= self.tick:
            out.append(self.arrivals.popleft()[1])
        self.tick += 1
        return out

    def process_input_requests(self, recv_reqs):
        self.waiting_queue.extend(recv_reqs)

    # --- batching --------------------------------------------------------------------------
    def get_next_batch_to_run(self):
        if self.last_batch is not None and self.last_batch.forward_mode.is_extend():
            # The last prefill batch joins the running (decode) batch.
            self.running_batch.merge_batch(self.last_batch)
        self.running_batch.filter_batch()
        new_batch = self.get_new_batch_prefill()
        if new_batch is not None:
            return new_batch
        if not self.running_batch.is_empty():
            self.running_batch = self.update_running_batch(self.running_batch)
            return None if self.running_batch.is_empty() else self.running_batch
        return None

    def get_new_batch_prefill(self):
        room = self.server_args.max_running_requests - len(self.running_batch.reqs)
        if room <= 0 or not self.waiting_queue:
            return None
        can_run, self.waiting_queue = self.waiting_queue[:room], self.waiting_queue[room:]
        return ScheduleBatch(reqs=can_run, forward_mode=ForwardMode.EXTEND,
                             enable_overlap=self.enable_overlap)

    def update_running_batch(self, batch):
        batch.filter_batch()
        batch.prepare_for_decode()
        return batch

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

    def process_batch_result(self, batch, result):
        if batch.forward_mode.is_decode():
            self.batch_result_processor.process_batch_result_decode(batch, result)
        elif batch.forward_mode.is_extend():
            self.batch_result_processor.process_batch_result_prefill(batch, result)

    def all_done(self):
        return (not self.arrivals and not self.waiting_queue and self.last_batch is None
                and all(r.finished() for r in self.running_batch.reqs))

    def self_check_during_idle(self):
        time.sleep(0.0005)   # nothing to run yet: the next requests have not arrived

    # --- loops -----------------------------------------------------------------------------
    def event_loop_overlap(self):
        """A scheduler loop that overlaps CPU processing and (here: simulated) GPU compute."""
        self.result_queue = collections.deque()
        while True:
            if self.should_stop():
                break
            if self.on_iteration is not None:
                self.on_iteration(self)
            recv_reqs = self.recv_requests()
            self.process_input_requests(recv_reqs)
            batch = self.get_next_batch_to_run()
            self.cur_batch = batch
            if batch is not None:
                batch_result = self.run_batch(batch)
                self.result_queue.append((batch.copy(), batch_result))
            if self.last_batch is not None:
                # The previous step's results, resolved only now: after this step's launch.
                tmp_batch, tmp_result = self.result_queue.popleft()
                self.process_batch_result(tmp_batch, tmp_result)
            elif batch is None:
                if self.all_done():
                    break
                self.self_check_during_idle()
            self.last_batch = batch
        # Stopping (or done): finish what was launched.
        while self.result_queue:
            tmp_batch, tmp_result = self.result_queue.popleft()
            self.process_batch_result(tmp_batch, tmp_result)
        self.last_batch = None

    def event_loop_normal(self):
        """A normal scheduler loop: results are processed right after each step."""
        while True:
            if self.should_stop():
                break
            if self.on_iteration is not None:
                self.on_iteration(self)
            recv_reqs = self.recv_requests()
            self.process_input_requests(recv_reqs)
            batch = self.get_next_batch_to_run()
            self.cur_batch = batch
            if batch is not None:
                result = self.run_batch(batch)
                self.process_batch_result(batch.copy(), result)
            elif self.all_done():
                break
            else:
                self.self_check_during_idle()
            self.last_batch = batch
        self.last_batch = None
