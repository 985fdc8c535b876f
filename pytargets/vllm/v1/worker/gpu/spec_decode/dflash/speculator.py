"""Mirrors vllm/v1/worker/gpu/spec_decode/dflash/speculator.py (vllm-project/vllm, no commit pinned: docs/upstream.md): DFlashSpeculator(
DraftModelSpeculator) drafts a whole block in one parallel forward; its propose is its own code
object (same parameters as every speculator's). DSparkSpeculator subclasses it."""
from vllm._compat.torch_shim import inference_mode
from vllm.v1.worker.gpu.spec_decode.speculator import DraftModelSpeculator


class DFlashSpeculator(DraftModelSpeculator):
    _speculator_name = "DFlash"

    @inference_mode()
    def propose(self, input_batch, attn_metadata, slot_mappings, last_hidden_states,
                aux_hidden_states, num_sampled, num_rejected, last_sampled, next_prefill_tokens,
                temperature, seeds, num_tokens_across_dp=None, dummy_run=False,
                skip_attn_for_dummy_run=False, mm_inputs=None, is_profile=False):
        return self.draft_block(input_batch, last_hidden_states, last_sampled, dummy_run, 200)
