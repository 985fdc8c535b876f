"""Mirrors vllm/v1/worker/gpu/spec_decode/eagle/speculator.py (vllm-project/vllm 02abe7013453: docs/upstream.md): EagleSpeculator(EAGLE/EAGLE3 drafting in Model
Runner V2), a TargetDependentARSpeculator: propose is inherited."""
from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator import TargetDependentARSpeculator


class EagleSpeculator(TargetDependentARSpeculator):
    def load_draft_model(self, *args, **kwargs):
        self.loaded = True
