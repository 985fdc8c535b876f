"""Mirrors vllm/v1/worker/gpu/spec_decode/eagle/speculator.py (vllm-project/vllm, no commit pinned: docs/upstream.md): EagleSpeculator(EAGLE/EAGLE3 drafting in Model
Runner V2), an AutoRegressiveSpeculator: propose is inherited."""
from vllm.v1.worker.gpu.spec_decode.autoregressive.speculator import AutoRegressiveSpeculator


class EagleSpeculator(AutoRegressiveSpeculator):
    def load_draft_model(self, *args, **kwargs):
        self.loaded = True
