"""Mirrors sglang/srt/speculative/multi_layer_eagle_worker_v2.py: MultiLayerEagleWorkerV2
(a BaseSpecWorker, not an EAGLEWorkerV2 subclass: its forward_batch_generation and verify are
its own code objects; verify also calls eagle_worker_common.run_eagle_verify) and
MultiLayerEagleDraftWorker with the same stage method names as EagleDraftWorker."""
import random
import sys
import time

import _faults
from _groundtruth import truth
from _workload import stage_work
from sglang.srt.speculative import eagle_worker_common
from sglang.srt.speculative.base_spec_worker import BaseDraftWorker, BaseSpecWorker
from sglang.srt.speculative.eagle_worker_common import EagleDraftInput, EagleVerifyInput
from sglang.srt.speculative.eagle_worker_v2 import _NullContext, _prefill_result


class MultiLayerEagleDraftWorker(BaseDraftWorker):
    def __init__(self, server_args, target_worker, seed):
        self.server_args = server_args
        self.target_worker = target_worker
        self.num_layers = server_args.num_draft_layers
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self.work_rng = random.Random(seed * 130363 + 5)

    def draft_tp_context(self, _group=None):
        return _NullContext()

    def draft(self, model_worker_batch):
        tokens = []
        for r in model_worker_batch.reqs:
            h = r.seq_state
            for layer in range(self.num_layers):   # one MTP layer per draft position group
                h = stage_work(h + layer, int((250 + 120 * self.speculative_num_steps)
                                              * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
            tokens.extend((h >> j) % 32000 for j in range(self.speculative_num_draft_tokens))
        return EagleVerifyInput(draft_token=tokens, spec_steps=self.speculative_num_steps,
                                draft_token_num=self.speculative_num_draft_tokens)

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids):
        h = target_hidden_states or 1
        for layer in range(self.num_layers):
            h = stage_work(h + layer, int(300 * len(batch.reqs) * self.work_rng.uniform(0.8, 1.25)))
        return EagleDraftInput(hidden_states=h, verified_id=list(next_token_ids),
                               new_seq_lens=list(batch.seq_lens))

    def _draft_extend_for_decode(self, batch, batch_result):
        h = batch_result.logits_output.hidden_states or 1
        for layer in range(self.num_layers):
            h = stage_work(h + layer, int(200 * len(batch.reqs) * self.work_rng.uniform(0.8, 1.25)))
        batch_result.next_draft_input.hidden_states = h


class MultiLayerEagleWorkerV2(BaseSpecWorker):
    def __init__(self, server_args, target_worker):
        self.server_args = server_args
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self._target_worker = target_worker
        self._draft_worker = MultiLayerEagleDraftWorker(server_args, target_worker,
                                                        server_args.random_seed)
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)

    @property
    def target_worker(self):
        return self._target_worker

    @property
    def draft_worker(self):
        return self._draft_worker

    def clear_cache_pool(self):
        pass

    def forward_batch_generation(self, model_worker_batch):
        T = truth()
        step = model_worker_batch.forward_ct
        if model_worker_batch.forward_mode.is_extend():
            batch_output = self.target_worker.forward_batch_generation(model_worker_batch)
            t0 = time.time_ns()
            batch_output.next_draft_input = self.draft_worker._draft_extend_for_prefill(
                model_worker_batch, batch_output.logits_output.hidden_states,
                batch_output.next_token_ids)
            t1 = time.time_ns()
            T.stage("draft_extend", t0, t1, model_worker_batch.reqs, step, mode="prefill",
                    method="MultiLayerEagleDraftWorker._draft_extend_for_prefill")
            return _prefill_result(batch_output, model_worker_batch)
        t0 = time.time_ns()
        verify_input = self.draft_worker.draft(model_worker_batch)
        t1 = time.time_ns()
        T.stage("draft", t0, t1, model_worker_batch.reqs, step)
        model_worker_batch.spec_info = verify_input
        t0 = time.time_ns()
        batch_output = self.verify(model_worker_batch)
        t1 = time.time_ns()
        T.stage("verify", t0, t1, model_worker_batch.reqs, step)
        t0 = time.time_ns()
        self.draft_worker._draft_extend_for_decode(model_worker_batch, batch_output)
        t1 = time.time_ns()
        T.stage("draft_extend", t0, t1, model_worker_batch.reqs, step, mode="decode")
        return batch_output

    def verify(self, batch):
        _faults.verify_entered(lambda: stage_work(len(batch.reqs), 5000))
        if _faults.want_hold("MultiLayerEagleWorkerV2.verify"):
            _faults.hold(sys._getframe(), "MultiLayerEagleWorkerV2.verify", batch.forward_ct, "frame")
        return eagle_worker_common.run_eagle_verify(
            batch,
            target_worker=self.target_worker,
            rng=self.accept_rng,
            topk=self.topk,
            num_steps=self.speculative_num_steps,
            num_draft_tokens=self.speculative_num_draft_tokens,
            accept_p=self.server_args.speculative_accept_p,
        )
