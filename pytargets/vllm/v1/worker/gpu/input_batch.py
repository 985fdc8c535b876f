"""Mirrors vllm/v1/worker/gpu/input_batch.py (subset) (vllm-project/vllm, no commit pinned: docs/upstream.md): the per-step batch the runner builds
(shared by both shapes: pytargets/_vllm_shared.py)."""
from _vllm_shared import InputBatch  # noqa: F401
