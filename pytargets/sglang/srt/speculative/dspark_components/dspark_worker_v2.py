"""Mirrors python/sglang/srt/speculative/dspark_components/dspark_worker_v2.py
(sgl-project/sglang 003c5589f7d3, a stored copy not shown to be main's newest: docs/upstream.md): DSparkWorkerV2(BaseSpecWorker).
forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
pp_proxy_tensors=None) sends EXTEND to _forward_prefill and everything else to
_forward_decode(self, batch, on_publish, grammar_barrier=None), which drafts with
DraftBlockProposer.propose(batch=..., ...) and verifies with TargetVerifyExecutor.run_compact or
run_non_compact (two functions; here one). The module imports dspark_components.* and
dflash_info_v2, not dflash_worker_v2.

Ground truth: "verify" times _forward_decode, "draft" times DraftBlockProposer.propose inside it;
the target verify is a "target_verify" event."""
import random
import time

import _faults
from _groundtruth import truth
from _sglang_loop import accept_drafts
from _workload import stage_work
from sglang.srt.managers.utils import GenerationBatchResult, prefill_result
from sglang.srt.runtime_context import get_parallel
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from sglang.srt.speculative.dspark_components.dspark_draft import DraftBlockProposer


class TargetVerifyExecutor:
    def __init__(self, target_worker):
        self.target_worker = target_worker

    def run_non_compact(self, *, batch, draft_input, verify_ids_2d, verify_window, sampling_info):
        return self.target_worker.forward_batch_generation(batch, is_verify=True)


class DSparkWorkerV2(BaseSpecWorker):
    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self.tp_rank = get_parallel().tp_rank
        self._target_worker = target_worker
        self._draft_worker = None
        self.gamma = server_args.speculative_num_steps
        self.verify_num_draft_tokens = server_args.speculative_num_draft_tokens
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)
        self._proposer = DraftBlockProposer(self.gamma, server_args.random_seed)
        self._verify_executor = TargetVerifyExecutor(target_worker)

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
            return self._forward_prefill(batch, on_publish, pp_proxy_tensors=pp_proxy_tensors)
        t0 = time.time_ns()
        result = self._forward_decode(batch, on_publish, grammar_barrier)
        t1 = time.time_ns()
        truth().stage("verify", t0, t1, batch.reqs, batch.forward_ct,
                      method="DSparkWorkerV2._forward_decode")
        return result

    def _forward_prefill(self, batch, on_publish, pp_proxy_tensors=None):
        out = self.target_worker.forward_batch_generation(batch, pp_proxy_tensors=pp_proxy_tensors)
        if on_publish is not None:
            on_publish(batch.seq_lens)
        return prefill_result(out, batch)

    def _forward_decode(self, batch, on_publish, grammar_barrier=None):
        bs = len(batch.reqs)
        _faults.verify_entered(lambda: stage_work(bs, 5000))
        t0 = time.time_ns()
        proposal = self._proposer.propose(batch=batch, draft_input=batch.spec_info,
                                          verify_window=None, bs=bs, device=None,
                                          target_model=None, sampling_info=None)
        t1 = time.time_ns()
        truth().stage("draft", t0, t1, batch.reqs, batch.forward_ct,
                      method="DraftBlockProposer.propose")
        t0 = time.time_ns()
        out = self._verify_executor.run_non_compact(
            batch=batch, draft_input=batch.spec_info, verify_ids_2d=proposal.draft_tokens,
            verify_window=None, sampling_info=None)
        t1 = time.time_ns()
        truth().event("target_verify", start_ns=t0, end_ns=t1, rids=[r.rid for r in batch.reqs],
                      step=batch.forward_ct, method="TargetVerifyExecutor.run_non_compact")
        n = self.verify_num_draft_tokens
        predict = [(out.logits_output.hidden_states >> (i % 20)) % 32000 for i in range(bs * n)]
        accept_lens = accept_drafts(self.accept_rng, self.server_args.speculative_accept_p,
                                    self.gamma, predict, proposal.draft_tokens, n, self.gamma + 1)
        new_seq_lens = [s + a for s, a in zip(batch.seq_lens, accept_lens)]
        if on_publish is not None:
            on_publish(new_seq_lens)
        return GenerationBatchResult(next_token_ids=predict, accept_lens=accept_lens,
                                     new_seq_lens=new_seq_lens, speculative_num_draft_tokens=n,
                                     forward_ct=batch.forward_ct)
