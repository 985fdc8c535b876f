"""Mirrors vllm/v1/worker/gpu/spec_decode/lilicorr/speculator.py (vllm-project/vllm, the stored
copy that imports dflash2's CandidateSampler: docs/upstream.md): LiLiCorrSpeculator(
DFlashSpeculator), chosen for method "dflash" when the draft's architecture is
LiLiCorrDraftModel; propose is DFlash's. The module imports dflash.speculator and
dflash2.speculator."""
from vllm.v1.worker.gpu.spec_decode.dflash.speculator import DFlashSpeculator
from vllm.v1.worker.gpu.spec_decode.dflash2 import speculator as _dflash2  # noqa: F401 (CandidateSampler upstream)


class LiLiCorrSpeculator(DFlashSpeculator):
    _speculator_name = "LiLiCorr"
