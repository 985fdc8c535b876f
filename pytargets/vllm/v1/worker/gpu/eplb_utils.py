"""Mirrors vllm/v1/worker/gpu/eplb_utils.py (vllm-project/vllm, no commit pinned: docs/upstream.md): step_eplb_after, a second functools.wraps
decorator on sample_tokens and _dummy_run (over inference_mode's: two __wrapped__ layers)."""
import functools


def step_eplb_after(is_dummy=False):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            return fn(self, *args, **kwargs)
        return wrapper
    return decorator
