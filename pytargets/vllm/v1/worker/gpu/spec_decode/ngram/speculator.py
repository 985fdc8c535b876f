"""Mirrors vllm/v1/worker/gpu/spec_decode/ngram/speculator.py (vllm-project/vllm 02abe7013453:
docs/upstream.md): NgramGPUSpeculator(BaseSpeculator), n-gram drafting on the GPU in Model Runner
V2 (speculative_config.use_ngram()), its propose its own code object with every speculator's
parameters; NgramLookup, the batched lookup NgramMTPSpeculator shares."""
from _workload import stage_work
from vllm._compat.torch_shim import inference_mode
from vllm.v1.worker.gpu.spec_decode.speculator import BaseSpeculator


class NgramLookup:
    """The longest context suffix seen before, and the tokens that followed it (a stand-in)."""

    def __init__(self, num_tokens):
        self.num_tokens = num_tokens

    def lookup(self, input_batch, last_sampled):
        n = input_batch.num_reqs
        stage_work(n, 60)
        drafts = [[(last_sampled[i] * 31 + j) % 32000 for j in range(self.num_tokens)] for i in range(n)]
        return drafts, [last_sampled[i] % 3 == 0 for i in range(n)]


class NgramGPUSpeculator(BaseSpeculator):
    supports_mm_inputs = False
    draft_logits = None

    def __init__(self, vllm_config, device, req_states):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
        self.req_states = req_states
        self.lookup = NgramLookup(self.num_speculative_steps)

    @inference_mode()
    def propose(self, input_batch, attn_metadata, slot_mappings, last_hidden_states,
                aux_hidden_states, num_sampled, num_rejected, last_sampled, next_prefill_tokens,
                temperature, seeds, dp_sync=None, dummy_run=False,
                skip_attn_for_dummy_run=False, mm_inputs=None, is_profile=False,
                num_speculative_tokens=None):
        if dummy_run:
            return [[0] * self.num_speculative_steps for _ in range(input_batch.num_reqs)]
        drafts, _ = self.lookup.lookup(input_batch, last_sampled)
        return drafts
