"""Stand-in for torch.inference_mode() used as a decorator (torch.utils._contextlib), shared by
both shapes' vllm/_compat/torch_shim.py. The decorated method becomes a functools.wraps wrapper whose code object (decorate_context) is
shared by every decorated function; the real method is at __wrapped__. vLLM decorates
execute_model, sample_tokens and the speculators' propose this way."""
import functools


class inference_mode:
    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def clone(self):
        return self.__class__(self.mode)

    def __call__(self, func):
        @functools.wraps(func)
        def decorate_context(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return decorate_context
