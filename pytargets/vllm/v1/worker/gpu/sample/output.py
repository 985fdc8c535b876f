"""Mirrors vllm/v1/worker/gpu/sample/output.py."""
import dataclasses
from typing import List, Optional


@dataclasses.dataclass
class SamplerOutput:
    sampled_token_ids: List[List[int]]      # per request: accepted drafts + 1 bonus/sampled token
    logprobs_tensors: object = None
    num_nans: object = None
    num_sampled: Optional[List[int]] = None
    num_rejected: Optional[List[int]] = None
