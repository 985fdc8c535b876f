"""Mirrors vllm/v1/worker/gpu/spec_decode/gemma4/speculator.py (vllm-project/vllm, no commit pinned: docs/upstream.md): Gemma4Speculator, an
AutoRegressiveSpeculator whose draft is Q-only over the target's KV (positions do not advance
between draft steps); propose is inherited."""
from vllm.v1.worker.gpu.spec_decode.autoregressive.speculator import AutoRegressiveSpeculator


class Gemma4Speculator(AutoRegressiveSpeculator):
    @property
    def advance_draft_positions(self):
        return False
