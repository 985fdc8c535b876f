"""Mirrors vllm/v1/worker/gpu/spec_decode/mtp/speculator.py (vllm-project/vllm 02abe7013453:
docs/upstream.md): MTPSpeculator (MTP drafting in Model Runner V2), a TargetDependentARSpeculator
whose propose is inherited; NgramMTPSpeculator(MTPSpeculator) (speculative_config.ngram_lookup)
looks the drafts up in the context first, then calls MTPSpeculator's propose itself
(super().propose: the traced code object, once per step) and keeps the n-gram drafts where one
matched. The module imports ngram.speculator for NgramLookup."""
from vllm._compat.torch_shim import inference_mode
from vllm.v1.worker.gpu.spec_decode.ngram.speculator import NgramLookup
from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator import TargetDependentARSpeculator


class MTPSpeculator(TargetDependentARSpeculator):
    def load_draft_model(self, *args, **kwargs):
        self.loaded = True


class NgramMTPSpeculator(MTPSpeculator):
    def __init__(self, vllm_config, device, req_states):
        super().__init__(vllm_config, device)
        self.req_states = req_states
        self.ngram = NgramLookup(self.num_speculative_steps)

    @inference_mode()
    def propose(self, input_batch, attn_metadata, slot_mappings, last_hidden_states,
                aux_hidden_states, num_sampled, num_rejected, last_sampled, next_prefill_tokens,
                temperature, seeds, dp_sync=None, dummy_run=False,
                skip_attn_for_dummy_run=False, mm_inputs=None, is_profile=False,
                num_speculative_tokens=None):
        if not dummy_run:
            ngram_drafts, has_match = self.ngram.lookup(input_batch, last_sampled)
        draft_tokens = super().propose(
            input_batch, attn_metadata, slot_mappings, last_hidden_states, aux_hidden_states,
            num_sampled, num_rejected, last_sampled, next_prefill_tokens, temperature, seeds,
            dp_sync=dp_sync, dummy_run=dummy_run, skip_attn_for_dummy_run=skip_attn_for_dummy_run,
            mm_inputs=mm_inputs, is_profile=is_profile, num_speculative_tokens=num_speculative_tokens)
        if dummy_run:
            return draft_tokens
        return [n if m else d for n, m, d in zip(ngram_drafts, has_match, draft_tokens)]
