"""Mirrors vllm/v1/core/sched/output.py (subset) (vllm-project/vllm, no commit pinned: docs/upstream.md): SchedulerOutput. num_scheduled_tokens maps
each scheduled request id to its token count (scheduler order); a dummy run's holds
"_dummy_req_<i>" ids."""
import dataclasses
from typing import Dict, List


@dataclasses.dataclass
class SchedulerOutput:
    num_scheduled_tokens: Dict[str, int]
    scheduled_spec_decode_tokens: Dict[str, List[int]]
    scheduled_new_req_ids: List[str]
    finished_req_ids: set
    total_num_scheduled_tokens: int = 0
    step: int = 0                                   # test-only: the engine step

    @classmethod
    def make_empty(cls):
        return cls({}, {}, [], set())
