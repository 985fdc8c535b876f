"""Mirrors vllm/v1/worker/gpu/spec_decode/rejection_sampler.py: RejectionSampler.__call__(logits, input_batch, draft_logits=None) (shared by both shapes: pytargets/_vllm_shared.py)."""
from _vllm_shared import RejectionSampler  # noqa: F401
