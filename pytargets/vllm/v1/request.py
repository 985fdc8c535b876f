"""Mirrors vllm/v1/request.py (vllm-project/vllm, no commit pinned: docs/upstream.md) (subset; shared by both shapes: pytargets/_vllm_shared.py)."""
from _vllm_shared import Request, RequestStatus  # noqa: F401
