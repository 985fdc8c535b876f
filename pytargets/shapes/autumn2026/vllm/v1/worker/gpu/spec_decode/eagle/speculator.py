"""Mirrors vllm/v1/worker/gpu/spec_decode/eagle/speculator.py: EagleSpeculator (EAGLE/EAGLE3/MTP
drafting in Model Runner V2). propose is inherited from AutoRegressiveSpeculator."""
from vllm.v1.worker.gpu.spec_decode.autoregressive.speculator import AutoRegressiveSpeculator


class EagleSpeculator(AutoRegressiveSpeculator):
    def load_draft_model(self, *args, **kwargs):
        self.loaded = True
