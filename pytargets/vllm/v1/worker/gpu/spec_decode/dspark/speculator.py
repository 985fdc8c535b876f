"""Mirrors vllm/v1/worker/gpu/spec_decode/dspark/speculator.py (vllm-project/vllm, no commit pinned: docs/upstream.md): DSparkSpeculator(
DFlashSpeculator); propose is DFlash's (the module imports dflash.speculator, so a DSpark
process has both modules)."""
from vllm.v1.worker.gpu.spec_decode.dflash.speculator import DFlashSpeculator


class DSparkSpeculator(DFlashSpeculator):
    _speculator_name = "DSpark"
