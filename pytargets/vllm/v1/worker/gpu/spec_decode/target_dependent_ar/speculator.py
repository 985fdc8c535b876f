"""Mirrors vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py (vllm-project/vllm
029a811ebaf3, main's newest stored copy: docs/upstream.md). TargetDependentARSpeculator(
DraftModelSpeculator), formerly AutoRegressiveSpeculator, owns propose (decorated with
torch.inference_mode); EagleSpeculator, MTPSpeculator and Gemma4Speculator inherit it, so the code
object behind each of their propose is this one (reached through __wrapped__). propose gained
dp_sync (in place of num_tokens_across_dp) and num_speculative_tokens."""
import _faults
from vllm._compat.torch_shim import inference_mode
from vllm.v1.worker.gpu.spec_decode.speculator import DraftModelSpeculator


class TargetDependentARSpeculator(DraftModelSpeculator):
    @property
    def advance_draft_positions(self):
        return True

    @inference_mode()
    def propose(self, input_batch, attn_metadata, slot_mappings, last_hidden_states,
                aux_hidden_states, num_sampled, num_rejected, last_sampled, next_prefill_tokens,
                temperature, seeds, dp_sync=None, dummy_run=False,
                skip_attn_for_dummy_run=False, mm_inputs=None, is_profile=False,
                num_speculative_tokens=None):
        if _faults.want_hold("TargetDependentARSpeculator.propose"):
            try:
                raise _faults.HeldFrame()
            except _faults.HeldFrame as e:
                _faults.hold(e.__traceback__, "TargetDependentARSpeculator.propose",
                             input_batch.step, "traceback")
        return self.draft_block(input_batch, last_hidden_states, last_sampled, dummy_run, 300)
