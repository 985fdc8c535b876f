"""CPU work for the test targets' stages, and the unrelated calls made between stages.

Stage work is real pure-Python arithmetic plus hashlib over bytes, sized by iteration counts (not
by sleeping), so a stage takes a few hundred microseconds to a few milliseconds on these
machines. Nothing here is a probe point.
"""
import hashlib
import os

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

# SPECPROBE_WORK_SCALE: the test guests (scripts/vmtest.sh) run Python about 18 times slower
# than the host; they scale the stages' work and the calls between them down by as much, so
# that a stage lasts about as long there as here.
MACHINE_SCALE = float(os.environ.get("SPECPROBE_WORK_SCALE", "1"))


def stage_work(seed, iters, blocks=2):
    scale = SCALE * MACHINE_SCALE
    return spin(seed, int(iters * scale)) ^ digest(seed & 0xFFFFFFFF, max(1, int(blocks * scale)))


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
    n = int(n * MACHINE_SCALE)
    c = _Counter()
    acc = 0
    half = n // 2
    for i in range(half):
        acc = _tiny(acc)
    for i in range(n - half):
        c.bump(1)
    return acc + c.n
