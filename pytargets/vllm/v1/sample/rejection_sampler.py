"""Mirrors vllm/v1/sample/rejection_sampler.py (vllm-project/vllm, no commit pinned: docs/upstream.md), the V1 runner's rejection sampler (shared
implementation: pytargets/_vllm_shared.py)."""
from _vllm_shared import RejectionSampler  # noqa: F401
