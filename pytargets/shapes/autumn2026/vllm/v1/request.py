"""Mirrors vllm/v1/request.py (subset; shared by both shapes: pytargets/_vllm_shared.py)."""
from _vllm_shared import Request, RequestStatus  # noqa: F401
