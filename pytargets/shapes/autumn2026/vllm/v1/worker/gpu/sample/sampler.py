"""Mirrors vllm/v1/worker/gpu/sample/sampler.py: plain sampling (no drafts in the batch) (shared by both shapes: pytargets/_vllm_shared.py)."""
from _vllm_shared import Sampler  # noqa: F401
