"""Mirrors the part of python/sglang/srt/runtime_context.py (sgl-project/sglang 13a7ffeceaf3) that
the spec-v2 workers use: on main their __init__ takes no ParallelState; they ask get_parallel()
for their ranks (eagle_worker_v2.py and dspark_worker_v2.py at 13a7ffeceaf3). One rank here:
TP 0 of 1, no DP, the only (so the last) PP stage."""
import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class _PPGroup:
    is_last_rank: bool = True


@dataclasses.dataclass(frozen=True)
class _Parallel:
    tp_rank: int = 0
    tp_size: int = 1
    dp_rank: Optional[int] = None
    pp_rank: int = 0
    pp_size: int = 1
    attn_dp_enabled: bool = False
    pp_group: _PPGroup = _PPGroup()


_PARALLEL = _Parallel()


def get_parallel():
    return _PARALLEL
