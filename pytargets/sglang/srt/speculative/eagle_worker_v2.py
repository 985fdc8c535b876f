"""Mirrors python/sglang/srt/speculative/eagle_worker_v2.py (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy, with main's 13a7ffeceaf3 stage shapes: draft(self, batch, *, with_topology=False), verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None) called by keyword, the PP tail draft and the idle draft of DP spec/prefill coordination (eagle_worker_common.spec_v2_forward, --pp-tail-draft, --dp-prefill-coordination) and main's __init__ (server_args, gpu_id, nccl_port, target_worker), ranks from runtime_context.get_parallel(); the branch's spec_stage_span_prefix and sync_hybrid_state live in hybrid_controller.BranchEAGLEWorkerV2: docs/upstream.md):
EagleDraftWorker(EagleDraftWorkerBase) with draft(self, batch), _draft_extend_for_prefill(self,
batch, target_hidden_states, next_token_ids, mm_input_embeds=None) and
_draft_extend_for_decode(self, batch, batch_result, source_draft_token_num=None);
EAGLEWorkerV2(BaseSpecWorker) with forward_batch_generation(self, batch, on_publish=None,
grammar_barrier=None, pp_proxy_tensors=None), verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None) (calls
eagle_worker_common.run_eagle_verify). Every argument is the ScheduleBatch.

Test-only additions: the ground truth (eagle_worker_common.spec_v2_forward) and the
fault/caveat hooks (_faults, and _realworld: what code around an engine does to its stages)."""
import random
import sys

import _faults
import _realworld
from _workload import stage_work
from sglang.srt.runtime_context import get_parallel
from sglang.srt.managers.tp_worker import TpModelWorker  # noqa: F401  (as the real module)
from sglang.srt.speculative import eagle_worker_common
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker, EagleDraftWorkerBase
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.eagle_worker_common import (
    build_eagle_verify_input,
    draft_tokens_for,
    prepare_for_draft,
    spec_v2_forward,
)
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.srt.speculative.spec_utils import draft_tp_context


class EagleDraftWorker(EagleDraftWorkerBase):
    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self.tp_rank = get_parallel().tp_rank
        self.target_worker = target_worker
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self.work_rng = random.Random(server_args.random_seed * 104729 + 3)
        self.draft_tp_context = draft_tp_context
        self.init_lm_head()

    def init_lm_head(self):
        self.shares_lm_head = True

    def draft(self, batch, *, with_topology=False):
        _realworld.inside("EagleDraftWorker.draft")
        if _faults.want_hold("EagleDraftWorker.draft"):
            try:
                raise _faults.HeldFrame()
            except _faults.HeldFrame as e:
                _faults.hold(e.__traceback__, "EagleDraftWorker.draft", batch.forward_ct, "traceback")
        draft_input = batch.spec_info
        forward_batch, _ = prepare_for_draft(draft_input, None, batch, None, None, self.topk,
                                             self.speculative_num_steps)
        draft_tokens = self.draft_forward(forward_batch, batch)
        verify_input = build_eagle_verify_input(
            batch, draft_input, None, None, draft_tokens, None, target_worker=self.target_worker,
            topk=self.topk, num_steps=self.speculative_num_steps,
            num_draft_tokens=self.speculative_num_draft_tokens)
        if with_topology:  # the PP tail draft relays the tree's shape with the tokens
            return verify_input, None, None
        return verify_input

    def draft_forward(self, forward_batch, batch):
        return draft_tokens_for(batch, self.work_rng, self.speculative_num_steps,
                                self.speculative_num_draft_tokens, 300)

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids,
                                  mm_input_embeds=None):
        h = target_hidden_states
        for r in batch.reqs:
            h = stage_work(h ^ r.seq_state, int(500 * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
        return EagleDraftInput(hidden_states=h, bonus_tokens=list(next_token_ids),
                               new_seq_lens=list(batch.seq_lens))

    def _draft_extend_for_decode(self, batch, batch_result, source_draft_token_num=None):
        h = batch_result.logits_output.hidden_states or 0
        for r, a in zip(batch.reqs, batch_result.accept_lens):
            h = stage_work(h ^ r.seq_state ^ a, int(300 * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
        nd = batch_result.next_draft_input
        nd.topk_p, nd.topk_index, nd.hidden_states = [1.0], [h % 32000], h


class EAGLEWorkerV2(BaseSpecWorker):
    draft_worker_cls = EagleDraftWorker

    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self.tp_rank = get_parallel().tp_rank
        self.speculative_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
        self._target_worker = target_worker
        self._draft_worker = self.draft_worker_cls(server_args, gpu_id, nccl_port, target_worker)
        # Acceptance ("what the GPU decides"): its own seeded stream, so the accept counts of a
        # run depend only on --seed and the batch composition, never on timing.
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        return spec_v2_forward(self, batch, on_publish, grammar_barrier, pp_proxy_tensors)

    def verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None):
        bs = len(batch.reqs)  # the fault hooks' closures take bs: batch stays a plain local, as upstream
        _realworld.inside("EAGLEWorkerV2.verify")
        _faults.verify_entered(lambda: stage_work(bs, 5000))
        _faults.verify_may_raise(lambda: stage_work(bs, 2500))
        if _faults.want_hold("EAGLEWorkerV2.verify"):
            _faults.hold(sys._getframe(), "EAGLEWorkerV2.verify", batch.forward_ct, "frame")
        return eagle_worker_common.run_eagle_verify(
            batch,
            target_worker=self.target_worker,
            topk=self.topk,
            num_draft_tokens=self.speculative_num_draft_tokens,
            metadata_ready_pre_pad=False,
            finalize_tree_path=True,
            grammar_barrier=grammar_barrier,
            rng=self.accept_rng,
            num_steps=self.speculative_num_steps,
            accept_p=self.server_args.speculative_accept_p,
        )
