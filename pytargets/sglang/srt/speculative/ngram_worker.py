"""Mirrors python/sglang/srt/speculative/ngram_worker.py as it is on SGLang's main branch: the
newest stored main copy (the one that imports sglang.kernels.ops.speculative.cache_locs; the
index gives no commit for it, see docs/upstream.md "How the newest main was found"), with what
main's other V2 workers have at 13a7ffeceaf3: forward_batch_generation(self, batch,
on_publish=None, grammar_barrier=None, pp_proxy_tensors=None), and an __init__ without
ps: ParallelState (ranks from runtime_context.get_parallel()).

NGRAMWorker(BaseSpecWorker) has no draft model. forward_batch_generation calls
_prepare_for_speculative_decoding(self, batch) for EVERY batch. That draft returns None on main
(never a bool): it returns at once unless the batch is a decode batch, and for a decode batch it
looks the n-grams up, sets batch.forward_mode = TARGET_VERIFY and puts an NgramVerifyInput in
batch.spec_info. forward_batch_generation then verifies inline if and only if
batch.forward_mode.is_target_verify() (main's own test for "this step drafted"), and sets
batch.forward_mode back to DECODE at the end of the verify. No spec_stage_span, no
get_retrieval_info or sync_hybrid_state, no _hybrid_prepared_drafts: those exist only on the
HYBRID branch (02a3cd954bab, sgl-project/sglang#37237), mirrored in hybrid_controller.py.

Ground truth: the "draft" line times _prepare_for_speculative_decoding of a call that drafted
(the batch is TARGET_VERIFY after it); the "verify" line (written by the scheduler) times the
whole forward_batch_generation call of a decode batch: the probe-able frame, which contains the
draft."""
import random
import sys
import time

import _faults
from _groundtruth import truth
from _sglang_loop import accept_drafts
from _workload import stage_work
from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from sglang.srt.runtime_context import get_parallel
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from sglang.srt.speculative.ngram_info import NgramVerifyInput


class NGRAMWorker(BaseSpecWorker):
    truth_verify_frame = "NGRAMWorker.forward_batch_generation"

    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self._target_worker = target_worker
        self._draft_worker = None
        self.tp_rank = get_parallel().tp_rank
        self.draft_token_num = server_args.speculative_num_draft_tokens
        self.speculative_num_draft_tokens = self.draft_token_num
        self.num_steps = server_args.speculative_num_steps
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)
        self.work_rng = random.Random(server_args.random_seed * 7 + 13)
        self.ngram_corpus = {}
        self._prev_decode_rids = set()

    def clear_cache_pool(self):
        self.ngram_corpus.clear()
        self._prev_decode_rids = set()

    def _prepare_draft_tokens(self, batch):
        tokens, match_lens = [], []
        for r in batch.reqs:
            ctx = (r.origin_input_ids + r.output_ids)[-8:]
            for i in range(len(ctx) - 1):   # index the n-grams of the context
                self.ngram_corpus[(ctx[i], ctx[i + 1])] = ctx[i + 1]
            h = stage_work(r.seq_state ^ len(self.ngram_corpus),
                           int(600 * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
            tokens.extend((h >> j) % 32000 for j in range(self.draft_token_num))
            match_lens.append(h % 5)
        return tokens, match_lens

    def _prepare_for_speculative_decoding(self, batch):
        # Decode-only: extend goes through the plain target forward, and an IDLE batch must
        # keep its forward_mode instead of being rewritten to TARGET_VERIFY below.
        if not batch.forward_mode.is_decode():
            return
        tokens, _ = self._prepare_draft_tokens(batch)
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        batch.spec_info = NgramVerifyInput(draft_token=tokens, draft_token_num=self.draft_token_num)

    def _update_ngram_corpus(self, batch):
        for r in batch.reqs:
            ctx = (r.origin_input_ids + r.output_ids)[-4:]
            for i in range(len(ctx) - 1):
                self.ngram_corpus[(ctx[i], ctx[i + 1])] = ctx[i + 1]

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        bs = len(batch.reqs)
        t0 = time.time_ns()
        self._prepare_for_speculative_decoding(batch)
        t1 = time.time_ns()
        if not batch.forward_mode.is_target_verify():
            out = self.target_worker.forward_batch_generation(batch, pp_proxy_tensors=pp_proxy_tensors)
            if on_publish is not None:
                on_publish(batch.seq_lens)
            return GenerationBatchResult(logits_output=out.logits_output,
                                         next_token_ids=out.next_token_ids,
                                         new_seq_lens=batch.seq_lens,
                                         speculative_num_draft_tokens=1, forward_ct=batch.forward_ct)
        truth().stage("draft", t0, t1, batch.reqs, batch.forward_ct,
                      method="NGRAMWorker._prepare_for_speculative_decoding")
        # Verify, inline: target forward over the drafted tree, then sampling/acceptance.
        _faults.verify_entered(lambda: stage_work(bs, 5000))
        if _faults.want_hold("NGRAMWorker.forward_batch_generation"):
            _faults.hold(sys._getframe(), "NGRAMWorker.forward_batch_generation",
                         batch.forward_ct, "frame")
        out = self.target_worker.forward_batch_generation(
            batch=None, forward_batch=ForwardBatch(ForwardMode.TARGET_VERIFY, bs, 0),
            pp_proxy_tensors=pp_proxy_tensors, is_verify=True, reqs=batch.reqs)
        n = self.draft_token_num
        predict = list(out.next_token_ids)
        accept_lens = accept_drafts(self.accept_rng, self.server_args.speculative_accept_p,
                                    self.num_steps, predict, batch.spec_info.draft_token, n)
        new_seq_lens = [s + a for s, a in zip(batch.seq_lens, accept_lens)]
        if on_publish is not None:
            on_publish(new_seq_lens)
        self._update_ngram_corpus(batch)
        self._prev_decode_rids = {r.rid for r in batch.reqs}
        batch.forward_mode = ForwardMode.DECODE
        return GenerationBatchResult(
            logits_output=out.logits_output, next_token_ids=predict, accept_lens=accept_lens,
            next_draft_input=NgramVerifyInput(draft_token_num=n, accept_tokens=predict,
                                              accept_lens=accept_lens, new_seq_lens=new_seq_lens),
            new_seq_lens=new_seq_lens, speculative_num_draft_tokens=n, forward_ct=batch.forward_ct)
