"""Mirrors sglang/srt/speculative/ngram_worker.py: NGRAMWorker has no draft model. Its draft is
_prepare_for_speculative_decoding (n-gram lookup over the request's tokens) and its verify is
inline in forward_batch_generation (no separate verify method, no draft extend).

Ground truth: the "draft" line times _prepare_for_speculative_decoding; the "verify" line times
the whole forward_batch_generation call of a decode batch (measured by the scheduler around the
call: that is the attach point a probe can see), so it contains the draft window."""
import random
import sys

import _faults
from _faults import verify_entered
from _groundtruth import truth
from _workload import stage_work
from sglang.srt.managers.scheduler import GenerationBatchResult
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from sglang.srt.speculative.eagle_worker_common import EagleVerifyInput, sample_accept_lens
import time


class NGRAMWorker(BaseSpecWorker):
    def __init__(self, server_args, target_worker):
        self.server_args = server_args
        self._target_worker = target_worker
        self.draft_token_num = server_args.speculative_num_draft_tokens
        self.num_steps = server_args.speculative_num_steps
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)
        self.work_rng = random.Random(server_args.random_seed * 7 + 13)
        self.ngram_cache = {}

    @property
    def target_worker(self):
        return self._target_worker

    @property
    def draft_worker(self):
        return None

    def clear_cache_pool(self):
        self.ngram_cache.clear()

    def _prepare_for_speculative_decoding(self, batch):
        if batch.forward_mode.is_extend():
            return
        tokens = []
        for r in batch.reqs:
            ctx = (r.origin_input_ids + r.output_ids)[-8:]
            h = r.seq_state
            for i in range(len(ctx) - 1):   # index the n-grams of the context
                self.ngram_cache[(ctx[i], ctx[i + 1])] = ctx[i + 1]
            h = stage_work(h ^ len(self.ngram_cache), int(600 * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
            tokens.extend((h >> j) % 32000 for j in range(self.draft_token_num))
        batch.spec_info = EagleVerifyInput(draft_token=tokens, spec_steps=self.num_steps,
                                           draft_token_num=self.draft_token_num)

    def forward_batch_generation(self, model_worker_batch):
        batch = model_worker_batch
        if batch.forward_mode.is_extend():
            out = self.target_worker.forward_batch_generation(batch)
            return GenerationBatchResult(logits_output=out.logits_output,
                                         next_token_ids=out.next_token_ids, accept_lens=None,
                                         speculative_num_draft_tokens=1, forward_ct=batch.forward_ct)
        t0 = time.time_ns()
        self._prepare_for_speculative_decoding(batch)
        t1 = time.time_ns()
        truth().stage("draft", t0, t1, batch.reqs, batch.forward_ct,
                      method="NGRAMWorker._prepare_for_speculative_decoding")
        # Verify, inline: target forward over the drafted tree, then sampling/acceptance.
        verify_entered(lambda: stage_work(len(batch.reqs), 5000))
        if _faults.want_hold("NGRAMWorker.forward_batch_generation"):
            _faults.hold(sys._getframe(), "NGRAMWorker.forward_batch_generation", batch.forward_ct, "frame")
        out = self.target_worker.forward_batch_generation(
            forward_batch=batch, is_verify=True, skip_attn_backend_init=True)
        accept_lens = sample_accept_lens(self.accept_rng, len(batch.reqs), self.num_steps,
                                         self.server_args.speculative_accept_p)
        predict = list(out.next_token_ids)
        for i, a in enumerate(accept_lens):
            for j in range(a - 1):
                predict[i * self.draft_token_num + j] = batch.spec_info.draft_token[i * self.draft_token_num + j]
        return GenerationBatchResult(logits_output=out.logits_output, next_token_ids=predict,
                                     accept_lens=accept_lens,
                                     speculative_num_draft_tokens=self.draft_token_num,
                                     forward_ct=batch.forward_ct)
