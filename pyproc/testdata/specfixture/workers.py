"""Stage-method shapes as they appear in SGLang/vLLM, for pyproc's tests."""
import functools
from abc import ABC, abstractmethod

CONSTANT = 42


def timed(fn):
    # A functools.wraps decorator: its wrapper's code object is shared by
    # every function it decorates.
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


class no_grad:
    # torch.no_grad()'s shape: a context-manager instance used as a decorator.
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def decorate_context(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return decorate_context


def plain_function(x):
    return x + 1


class BaseSpecWorker(ABC):
    @abstractmethod
    def draft(self, batch):
        ...

    def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size):
        return sum(num_correct_drafts_per_req) / max(batch_size, 1)


class EAGLEWorkerV2(BaseSpecWorker):
    class DraftState:
        def advance(self, n):
            return n

        class Tree:
            def expand(self, depth):
                return depth

    @timed
    def draft(self, batch):
        return batch

    @no_grad()
    def verify(self, batch):
        return batch

    @no_grad()
    @timed
    def forward_batch_generation(self, batch):
        return batch

    @functools.lru_cache(maxsize=None)
    def cached_plan(self, n):
        return n

    @staticmethod
    def make_tree(depth):
        return depth

    @classmethod
    def from_config(cls, cfg):
        return cls()

    @property
    def batch_size(self):
        return 1

    def iter_tokens(self, n):
        yield from range(n)

    async def run_async(self, batch):
        return batch

    def _draft_extend_for_decode(self, batch):
        return batch


class FrozenKVMTPWorkerV2(EAGLEWorkerV2):
    # Inherits verify: found through the MRO, as getattr would.
    pass


def _real(obj):
    while True:
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, property):
            obj = obj.fget
        elif hasattr(obj, "__wrapped__"):
            obj = obj.__wrapped__
        else:
            return obj


def _lookup(qualname):
    obj = None
    scope = globals()
    for part in qualname.split("."):
        if obj is None:
            obj = scope[part]
        else:
            for klass in obj.__mro__:
                if part in vars(klass):
                    obj = vars(klass)[part]
                    break
            else:
                raise AttributeError(part)
    return _real(obj)


# (qualname to look up, qualname of the code object it must resolve to)
SHAPES = [
    ("plain_function", "plain_function"),
    ("EAGLEWorkerV2._draft_extend_for_decode", "EAGLEWorkerV2._draft_extend_for_decode"),
    ("EAGLEWorkerV2.DraftState.advance", "EAGLEWorkerV2.DraftState.advance"),
    ("EAGLEWorkerV2.DraftState.Tree.expand", "EAGLEWorkerV2.DraftState.Tree.expand"),
    ("EAGLEWorkerV2.make_tree", "EAGLEWorkerV2.make_tree"),
    ("EAGLEWorkerV2.from_config", "EAGLEWorkerV2.from_config"),
    ("EAGLEWorkerV2.batch_size", "EAGLEWorkerV2.batch_size"),
    ("EAGLEWorkerV2.iter_tokens", "EAGLEWorkerV2.iter_tokens"),
    ("EAGLEWorkerV2.run_async", "EAGLEWorkerV2.run_async"),
    ("EAGLEWorkerV2.draft", "EAGLEWorkerV2.draft"),
    ("EAGLEWorkerV2.verify", "EAGLEWorkerV2.verify"),
    ("EAGLEWorkerV2.forward_batch_generation", "EAGLEWorkerV2.forward_batch_generation"),
    ("EAGLEWorkerV2.cached_plan", "EAGLEWorkerV2.cached_plan"),
    ("BaseSpecWorker.on_verify_complete_cpu", "BaseSpecWorker.on_verify_complete_cpu"),
    ("EAGLEWorkerV2.on_verify_complete_cpu", "BaseSpecWorker.on_verify_complete_cpu"),
    ("FrozenKVMTPWorkerV2.verify", "EAGLEWorkerV2.verify"),
]


def shapes():
    for qualname, code_qualname in SHAPES:
        fn = _lookup(qualname)
        assert fn.__qualname__ == code_qualname, (qualname, fn.__qualname__)
        yield qualname, fn
