"""Mirrors sglang/srt/speculative/frozen_kv_mtp_worker_v2.py: FrozenKVMTPWorkerV2(EAGLEWorkerV2)
reuses EAGLEWorkerV2's forward_batch_generation and verify verbatim (same code objects); its
draft worker FrozenKVMTPDraftWorker owns the draft loop and a draft extend that is only a seed
selection (no draft-model forward), so those methods are its own code objects."""
import random

from _faults import want_hold, hold, HeldFrame
from _workload import stage_work
from sglang.srt.speculative.eagle_worker_common import EagleDraftInput, EagleVerifyInput
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2


class FrozenKVMTPDraftWorker(EagleDraftWorker):
    def draft(self, model_worker_batch):
        if want_hold("FrozenKVMTPDraftWorker.draft"):
            try:
                raise HeldFrame()
            except HeldFrame as e:
                hold(e.__traceback__, "FrozenKVMTPDraftWorker.draft",
                     model_worker_batch.forward_ct, "traceback")
        tokens = []
        for r in model_worker_batch.reqs:
            # seed forward + recurrent steps reading the target KV (read-only)
            h = stage_work(r.seq_state, int((500 + 200 * self.speculative_num_steps)
                                            * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
            tokens.extend((h >> (2 * j)) % 32000 for j in range(self.speculative_num_draft_tokens))
        return EagleVerifyInput(draft_token=tokens, spec_steps=self.speculative_num_steps,
                                draft_token_num=self.speculative_num_draft_tokens)

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids):
        h = stage_work(target_hidden_states or 1, int(200 * len(batch.reqs) * self.work_rng.uniform(0.8, 1.25)))
        return EagleDraftInput(hidden_states=h, verified_id=list(next_token_ids),
                               new_seq_lens=list(batch.seq_lens))

    def _draft_extend_for_decode(self, batch, batch_result):
        # Seed select only: last accepted token + target hidden state for the next draft.
        h = stage_work(sum(batch_result.accept_lens), int(150 * len(batch.reqs) * self.work_rng.uniform(0.8, 1.25)))
        nd = batch_result.next_draft_input
        nd.hidden_states = h


class FrozenKVMTPWorkerV2(EAGLEWorkerV2):
    draft_worker_cls = FrozenKVMTPDraftWorker
