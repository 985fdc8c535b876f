"""Mirrors vllm/v1/worker/gpu/spec_decode/mtp/speculator.py: MTPSpeculator(MTP drafting in Model
Runner V2), an AutoRegressiveSpeculator: propose is inherited."""
from vllm.v1.worker.gpu.spec_decode.autoregressive.speculator import AutoRegressiveSpeculator


class MTPSpeculator(AutoRegressiveSpeculator):
    def load_draft_model(self, *args, **kwargs):
        self.loaded = True
