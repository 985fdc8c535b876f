"""Mirrors vllm/v1/worker/gpu/input_batch.py (subset): the per-step batch the runner builds."""
import dataclasses
from typing import Dict, List


@dataclasses.dataclass
class InputBatch:
    req_ids: List[str]
    num_scheduled_tokens: List[int]
    draft_tokens: Dict[str, List[int]]   # req_id -> the draft tokens being verified this step
    step: int = 0                        # test-only: the engine step

    @property
    def num_reqs(self):
        return len(self.req_ids)

    @property
    def num_draft_tokens(self):
        return sum(len(v) for v in self.draft_tokens.values())
