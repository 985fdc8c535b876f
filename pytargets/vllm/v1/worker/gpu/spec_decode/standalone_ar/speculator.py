"""Mirrors vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py (vllm-project/vllm
04d2353e916d, the stored copy; speculative_config.uses_draft_model() picks it at 02abe7013453:
docs/upstream.md): StandaloneARSpeculator(DraftModelSpeculator), a separate small draft LM run
independently of the target; its propose is its own code object with every speculator's
parameters (dp_sync, num_speculative_tokens)."""
from vllm._compat.torch_shim import inference_mode
from vllm.v1.worker.gpu.spec_decode.speculator import DraftModelSpeculator


class StandaloneARSpeculator(DraftModelSpeculator):
    num_extra_query_per_req = 1

    @inference_mode()
    def propose(self, input_batch, attn_metadata, slot_mappings, last_hidden_states,
                aux_hidden_states, num_sampled, num_rejected, last_sampled, next_prefill_tokens,
                temperature, seeds, dp_sync=None, dummy_run=False,
                skip_attn_for_dummy_run=False, mm_inputs=None, is_profile=False,
                num_speculative_tokens=None):
        return self.draft_block(input_batch, last_hidden_states, last_sampled, dummy_run, 350)
