"""Mirrors vllm/v1/worker/gpu/spec_decode/autoregressive/speculator.py (vllm-project/vllm
6534e0667d6d, a stored copy not shown to be main's newest: docs/upstream.md): AutoRegressiveSpeculator(DraftModelSpeculator) owns propose (decorated with
torch.inference_mode); EagleSpeculator, MTPSpeculator and Gemma4Speculator inherit it, so the
code object behind each of their propose is this one (reached through __wrapped__)."""
import _faults
from vllm._compat.torch_shim import inference_mode
from vllm.v1.worker.gpu.spec_decode.speculator import DraftModelSpeculator


class AutoRegressiveSpeculator(DraftModelSpeculator):
    @property
    def advance_draft_positions(self):
        return True

    @inference_mode()
    def propose(self, input_batch, attn_metadata, slot_mappings, last_hidden_states,
                aux_hidden_states, num_sampled, num_rejected, last_sampled, next_prefill_tokens,
                temperature, seeds, num_tokens_across_dp=None, dummy_run=False,
                skip_attn_for_dummy_run=False, mm_inputs=None, is_profile=False):
        if _faults.want_hold("AutoRegressiveSpeculator.propose"):
            try:
                raise _faults.HeldFrame()
            except _faults.HeldFrame as e:
                _faults.hold(e.__traceback__, "AutoRegressiveSpeculator.propose",
                             input_batch.step, "traceback")
        return self.draft_block(input_batch, last_hidden_states, last_sampled, dummy_run, 300)
