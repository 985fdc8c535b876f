"""Mirrors vllm/v1/worker/gpu/spec_decode/mtp/speculator.py (vllm-project/vllm, no commit pinned: docs/upstream.md): MTPSpeculator(MTP drafting in Model
Runner V2), an AutoRegressiveSpeculator: propose is inherited."""
from vllm.v1.worker.gpu.spec_decode.autoregressive.speculator import AutoRegressiveSpeculator


class MTPSpeculator(AutoRegressiveSpeculator):
    def load_draft_model(self, *args, **kwargs):
        self.loaded = True
