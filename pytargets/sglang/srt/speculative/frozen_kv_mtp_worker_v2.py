"""Mirrors python/sglang/srt/speculative/frozen_kv_mtp_worker_v2.py (sgl-project/sglang
003c5589f7d3, a stored copy not shown to be main's newest: docs/upstream.md). FrozenKVMTPDraftWorker(EagleDraftWorkerBase, TpModelWorker) is not an
EagleDraftWorker: its draft(self, batch), _draft_extend_for_prefill and
_draft_extend_for_decode(self, batch, batch_result) (a seed selection, no forward) are its own
code objects. FrozenKVMTPWorkerV2(EAGLEWorkerV2) has its own __init__ and
forward_batch_generation (EAGLE's skeleton) and inherits verify (EAGLEWorkerV2.verify's code).
The module imports eagle_worker_v2."""
import random

from _faults import HeldFrame, hold, want_hold
from _workload import stage_work
from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.speculative.base_spec_worker import EagleDraftWorkerBase
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.eagle_worker_common import (
    build_eagle_verify_input,
    draft_tokens_for,
    spec_v2_forward,
)
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
from sglang.srt.speculative.spec_utils import draft_tp_context


class FrozenKVMTPDraftWorker(EagleDraftWorkerBase, TpModelWorker):
    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        TpModelWorker.__init__(self, server_args, server_args.random_seed)
        self.target_worker = target_worker
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self.work_rng = random.Random(server_args.random_seed * 104729 + 3)
        self.draft_tp_context = draft_tp_context

    def draft(self, batch):
        if want_hold("FrozenKVMTPDraftWorker.draft"):
            try:
                raise HeldFrame()
            except HeldFrame as e:
                hold(e.__traceback__, "FrozenKVMTPDraftWorker.draft", batch.forward_ct, "traceback")
        # seed forward + recurrent steps reading the target KV (read-only)
        tokens = draft_tokens_for(batch, self.work_rng, self.speculative_num_steps,
                                  self.speculative_num_draft_tokens, 500, shift=2)
        return build_eagle_verify_input(
            batch, batch.spec_info, None, None, tokens, None, target_worker=self.target_worker,
            topk=self.topk, num_steps=self.speculative_num_steps,
            num_draft_tokens=self.speculative_num_draft_tokens)

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids,
                                  mm_input_embeds=None):
        h = stage_work(target_hidden_states or 1, int(200 * len(batch.reqs) * self.work_rng.uniform(0.8, 1.25)))
        return EagleDraftInput(hidden_states=h, bonus_tokens=list(next_token_ids),
                               new_seq_lens=list(batch.seq_lens))

    def _draft_extend_for_decode(self, batch, batch_result):
        # Seed select only: last accepted token + target hidden state for the next draft.
        h = stage_work(sum(batch_result.accept_lens), int(150 * len(batch.reqs) * self.work_rng.uniform(0.8, 1.25)))
        batch_result.next_draft_input.hidden_states = h


class FrozenKVMTPWorkerV2(EAGLEWorkerV2):
    draft_worker_cls = FrozenKVMTPDraftWorker

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        return spec_v2_forward(self, batch, on_publish, grammar_barrier, pp_proxy_tensors)
