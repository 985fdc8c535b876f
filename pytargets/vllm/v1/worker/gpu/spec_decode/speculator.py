"""Mirrors vllm/v1/worker/gpu/spec_decode/speculator.py (vllm-project/vllm, no commit pinned: docs/upstream.md): DraftModelSpeculator, the base of the
speculators that run a draft model. Every propose takes (input_batch, attn_metadata,
slot_mappings, last_hidden_states, aux_hidden_states, num_sampled, num_rejected, last_sampled,
next_prefill_tokens, temperature, seeds, ..., dummy_run=False, ...): the runner passes them by
position when serving and by name in a dummy run."""
import random

from _workload import stage_work


class BaseSpeculator:
    """Every speculator's base (NgramGPUSpeculator has no draft model)."""


class DraftModelSpeculator(BaseSpeculator):
    supports_mm_inputs = False

    def __init__(self, vllm_config, device):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
        self.work_rng = random.Random(vllm_config.seed * 104729 + 3)
        self.draft_logits = None
        self.draft_token_confidence_probs = None

    def draft_block(self, input_batch, last_hidden_states, last_sampled, dummy_run, per_req):
        """The draft work: a draft prefill and K-1 draft decode steps per request."""
        if dummy_run:
            stage_work(input_batch.num_reqs, 200)
            return [[0] * self.num_speculative_steps for _ in range(input_batch.num_reqs)]
        draft_tokens = []
        h = last_hidden_states
        for i in range(input_batch.num_reqs):
            h = stage_work(h ^ last_sampled[i], int((per_req + 150 * self.num_speculative_steps)
                                                    * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            draft_tokens.append([(h >> (3 * j)) % 32000 for j in range(self.num_speculative_steps)])
        return draft_tokens
