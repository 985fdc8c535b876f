"""Mirrors vllm/v1/core/sched/output.py (subset)."""
import dataclasses
from typing import Dict, List


@dataclasses.dataclass
class SchedulerOutput:
    req_ids: List[str]                              # batch order (test helper)
    num_scheduled_tokens: Dict[str, int]
    scheduled_spec_decode_tokens: Dict[str, List[int]]
    scheduled_new_req_ids: List[str]
    finished_req_ids: set
    step: int = 0                                   # test-only: the engine step
