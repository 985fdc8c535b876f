"""Mirrors python/sglang/srt/distributed/parallel_state_wrapper.py (sgl-project/sglang
02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md): the ranks a spec-v2 worker is built with (one ParallelState instead of the
tp_rank, dp_rank, moe_ep_rank, ... arguments of older releases)."""
import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class ParallelState:
    tp_rank: int = 0
    tp_size: int = 1
    dp_rank: Optional[int] = None
    pp_rank: int = 0
    pp_size: int = 1
