"""Mirrors python/sglang/srt/speculative/dflash_worker_v2.py (sgl-project/sglang 0057abea41fc, a stored copy not shown to be main's newest: docs/upstream.md):
DFlashWorkerV2(BaseSpecWorker) drafts a block with its draft model and verifies it inline in
forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
pp_proxy_tensors=None): no draft or verify method of its own. A decode batch keeps
forward_mode DECODE for the whole call (the verify runs on a separate TARGET_VERIFY
ForwardBatch); a prefill batch is EXTEND. The module imports dspark_components.dspark_draft.

Ground truth: the scheduler times forward_batch_generation of a decode batch as "verify" (the
probe-able frame); the draft inside it is an "inline_draft" event."""
import random
import time

import _faults
from _groundtruth import truth
from _sglang_loop import accept_drafts
from _workload import stage_work
from sglang.srt.managers.utils import GenerationBatchResult, prefill_result
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch, ForwardMode
from sglang.srt.runtime_context import get_parallel
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from sglang.srt.speculative.dspark_components.dspark_draft import resolve_greedy_mask


class DFlashWorkerV2(BaseSpecWorker):
    truth_verify_frame = "DFlashWorkerV2.forward_batch_generation"

    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self.tp_rank = get_parallel().tp_rank
        self._target_worker = target_worker
        self._draft_worker = None
        self.block_size = server_args.speculative_num_draft_tokens
        self.num_steps = server_args.speculative_num_steps
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)
        self.work_rng = random.Random(server_args.random_seed * 104729 + 3)

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
            out = self.target_worker.forward_batch_generation(
                batch, pp_proxy_tensors=pp_proxy_tensors, capture_hidden_mode=CaptureHiddenMode.FULL)
            if on_publish is not None:
                on_publish(batch.seq_lens)
            return prefill_result(out, batch)
        bs = len(batch.reqs)
        _faults.verify_entered(lambda: stage_work(bs, 5000))
        # 1) Draft a fixed block with the draft model (inline).
        t0 = time.time_ns()
        greedy = resolve_greedy_mask(bs=bs, sampling_info=None)
        h = 0
        for r in batch.reqs:
            h = stage_work(h ^ r.seq_state, int((300 + 150 * self.num_steps) * self.work_rng.uniform(0.8, 1.25)),
                           blocks=1)
            r.seq_state = h
        draft_tokens = [(h >> (3 * j)) % 32000 for j in range(bs * self.block_size)]
        t1 = time.time_ns()
        truth().event("inline_draft", start_ns=t0, end_ns=t1, rids=[r.rid for r in batch.reqs],
                      step=batch.forward_ct, greedy=all(greedy))
        # 2) Target verify on its own ForwardBatch (batch.forward_mode stays DECODE).
        out = self.target_worker.forward_batch_generation(
            batch=None, forward_batch=ForwardBatch(ForwardMode.TARGET_VERIFY, bs, h),
            is_verify=True, skip_attn_backend_init=True, reqs=batch.reqs)
        n = self.block_size
        predict = list(out.next_token_ids)
        accept_lens = accept_drafts(self.accept_rng, self.server_args.speculative_accept_p,
                                    self.num_steps, predict, draft_tokens, n)
        new_seq_lens = [s + a for s, a in zip(batch.seq_lens, accept_lens)]
        if on_publish is not None:
            on_publish(new_seq_lens)
        return GenerationBatchResult(logits_output=out.logits_output, next_token_ids=predict,
                                     accept_lens=accept_lens, new_seq_lens=new_seq_lens,
                                     speculative_num_draft_tokens=n, forward_ct=batch.forward_ct)
