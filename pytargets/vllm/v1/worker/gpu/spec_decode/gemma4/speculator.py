"""Mirrors vllm/v1/worker/gpu/spec_decode/gemma4/speculator.py (vllm-project/vllm 02abe7013453: docs/upstream.md): Gemma4Speculator, an
TargetDependentARSpeculator whose draft is Q-only over the target's KV (positions do not advance
between draft steps); propose is inherited."""
from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator import TargetDependentARSpeculator


class Gemma4Speculator(TargetDependentARSpeculator):
    @property
    def advance_draft_positions(self):
        return False
