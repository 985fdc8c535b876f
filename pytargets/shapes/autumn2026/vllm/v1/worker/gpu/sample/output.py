"""Mirrors vllm/v1/worker/gpu/sample/output.py (shared by both shapes: pytargets/_vllm_shared.py)."""
from _vllm_shared import SamplerOutput  # noqa: F401
