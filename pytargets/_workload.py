"""CPU work for the test targets' stages, and the unrelated calls made between stages.

Stage work is real pure-Python arithmetic plus hashlib over bytes, sized by iteration counts (not
by sleeping), so a stage takes a few hundred microseconds to a few milliseconds on these
machines. Nothing here is a probe point.
"""
import hashlib

_BLOCK = bytes(range(256)) * 64  # 16 KiB


def spin(seed, iters):
    """LCG mixing: ~50-90 ns per iteration depending on the interpreter."""
    h = (seed | 1) & 0xFFFFFFFF
    for i in range(iters):
        h = (h * 1103515245 + 12345 + i) & 0xFFFFFFFF
    return h


def digest(seed, blocks):
    m = hashlib.sha256(seed.to_bytes(8, "little"))
    for _ in range(blocks):
        m.update(_BLOCK)
    return int.from_bytes(m.digest()[:8], "little")


# --work-scale: stage calls on a GPU server last milliseconds; scaling the work
# brings the test targets' stages closer to that.
SCALE = 1.0


def stage_work(seed, iters, blocks=2):
    return spin(seed, int(iters * SCALE)) ^ digest(seed & 0xFFFFFFFF, max(1, int(blocks * SCALE)))


def _tiny(x):
    return x + 1


class _Counter:
    __slots__ = ("n",)

    def __init__(self):
        self.n = 0

    def bump(self, k):
        self.n += k
        return self.n


def unrelated_calls(n):
    """n small Python function/method calls, none of them a stage: a tracer that traps on
    every call (instead of on the watched code objects) makes these visibly slow."""
    c = _Counter()
    acc = 0
    half = n // 2
    for i in range(half):
        acc = _tiny(acc)
    for i in range(n - half):
        c.bump(1)
    return acc + c.n
