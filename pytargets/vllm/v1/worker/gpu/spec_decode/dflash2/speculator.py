"""Mirrors vllm/v1/worker/gpu/spec_decode/dflash2/speculator.py (vllm-project/vllm 030da624231c:
docs/upstream.md): DFlash2Speculator(DFlashSpeculator), chosen for method "dflash" when the draft's
architecture is DFlash2DraftModel; propose is DFlash's (the module imports dflash.speculator)."""
from vllm.v1.worker.gpu.spec_decode.dflash.speculator import DFlashSpeculator


class DFlash2Speculator(DFlashSpeculator):
    _speculator_name = "DFlash2"
