"""Mirrors python/sglang/srt/speculative/uno_worker_v2.py (sgl-project/sglang 087f9bd701dd, a stored copy not shown to be main's newest: docs/upstream.md):
UnoWorkerV2(BaseSpecWorker), one model drafting for itself. forward_batch_generation(self,
batch, on_publish=None, grammar_barrier=None, pp_proxy_tensors=None) sends an EXTEND batch to
_forward_prefill and a DECODE batch to _forward_decode(self, batch, on_publish), which builds a
ForwardBatch (no requests in it) for _run_draft_block(self, forward_batch, *, need_top1=True)
and another for _run_target_block(self, forward_batch, *, need_top1=True) (tree mode verifies
with eagle_worker_common.run_eagle_verify instead). The module imports eagle_worker_common, not
eagle_worker_v2.

Ground truth: "verify" times _forward_decode (the frame that still holds the batch and so its
requests), "draft" times _run_draft_block inside it; _run_target_block is an event."""
import random
import time

import _faults
from _groundtruth import truth
from _sglang_loop import accept_drafts
from _workload import stage_work
from sglang.srt.managers.utils import GenerationBatchResult, prefill_result
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from sglang.srt.runtime_context import get_parallel
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker


class UnoWorkerV2(BaseSpecWorker):
    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self.tp_rank = get_parallel().tp_rank
        self._target_worker = target_worker
        self._draft_worker = None
        self.forward_width = server_args.speculative_num_draft_tokens
        self.num_steps = server_args.speculative_num_steps
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)
        self.work_rng = random.Random(server_args.random_seed * 104729 + 3)

    def _run_draft_block(self, forward_batch, *, need_top1=True):
        h = stage_work(forward_batch.seq_state, int((300 + 150 * self.num_steps) * forward_batch.batch_size
                                                   * self.work_rng.uniform(0.8, 1.25)), blocks=1)
        return [(h >> (3 * j)) % 32000 for j in range(forward_batch.batch_size * self.forward_width)]

    def _run_target_block(self, forward_batch, *, need_top1=True):
        h = stage_work(forward_batch.seq_state, int((2000 + 800 * forward_batch.batch_size)
                                                   * self.work_rng.uniform(0.8, 1.25)), blocks=2)
        return h

    def _forward_prefill(self, batch, on_publish, pp_proxy_tensors=None):
        out = self.target_worker.forward_batch_generation(batch, pp_proxy_tensors=pp_proxy_tensors)
        if on_publish is not None:
            on_publish(batch.seq_lens)
        return prefill_result(out, batch)

    def _forward_decode(self, batch, on_publish):
        bs = len(batch.reqs)
        _faults.verify_entered(lambda: stage_work(bs, 5000))
        seq = 0
        for r in batch.reqs:
            seq ^= r.seq_state
        draft_fb = ForwardBatch(ForwardMode.TARGET_VERIFY, bs, seq)
        t0 = time.time_ns()
        candidates = self._run_draft_block(draft_fb, need_top1=True)
        t1 = time.time_ns()
        truth().stage("draft", t0, t1, batch.reqs, batch.forward_ct, method="UnoWorkerV2._run_draft_block")
        verify_fb = ForwardBatch(ForwardMode.TARGET_VERIFY, bs, seq ^ len(candidates))
        t0 = time.time_ns()
        h = self._run_target_block(verify_fb, need_top1=True)
        t1 = time.time_ns()
        truth().event("target_block", start_ns=t0, end_ns=t1, rids=[r.rid for r in batch.reqs],
                      step=batch.forward_ct, method="UnoWorkerV2._run_target_block")
        n = self.forward_width
        predict = [(h >> (i % 20)) % 32000 for i in range(bs * n)]
        # UNO verifies n - 2 drafts: each accept length holds 2 tokens that are no draft.
        accept_lens = [a + 1 for a in accept_drafts(self.accept_rng, self.server_args.speculative_accept_p,
                                                    self.num_steps - 1, predict, candidates, n)]
        new_seq_lens = [s + a for s, a in zip(batch.seq_lens, accept_lens)]
        if on_publish is not None:
            on_publish(new_seq_lens)
        return GenerationBatchResult(next_token_ids=predict, accept_lens=accept_lens,
                                     new_seq_lens=new_seq_lens, speculative_num_draft_tokens=n,
                                     forward_ct=batch.forward_ct, num_non_draft_tokens_per_req=2)

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        if batch.forward_mode == ForwardMode.EXTEND:
            return self._forward_prefill(batch, on_publish, pp_proxy_tensors=pp_proxy_tensors)
        if batch.forward_mode == ForwardMode.DECODE:
            t0 = time.time_ns()
            result = self._forward_decode(batch, on_publish)
            t1 = time.time_ns()
            truth().stage("verify", t0, t1, batch.reqs, batch.forward_ct,
                          method="UnoWorkerV2._forward_decode")
            return result
        raise RuntimeError("UNO expected an EXTEND or DECODE batch, got %s." % batch.forward_mode)
