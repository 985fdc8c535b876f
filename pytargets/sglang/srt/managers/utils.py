"""Mirrors python/sglang/srt/managers/utils.py (sgl-project/sglang, no commit pinned: docs/upstream.md): GenerationBatchResult, what a worker's
forward_batch_generation returns (accept_lens include the bonus token)."""
import dataclasses
from typing import Any, List, Optional


@dataclasses.dataclass
class GenerationBatchResult:
    logits_output: Any = None
    next_token_ids: Optional[List[int]] = None
    accept_lens: Optional[List[int]] = None
    next_draft_input: Any = None
    new_seq_lens: Optional[List[int]] = None
    speculative_num_draft_tokens: int = 1
    can_run_cuda_graph: bool = False
    num_correct_drafts: int = 0
    num_correct_drafts_per_req_cpu: Optional[List[int]] = None
    num_non_draft_tokens_per_req: int = 1  # tokens of each accept length that are no draft (UNO: 2)
    spec_route: Optional[str] = None   # HYBRID: the route that produced this result
    forward_ct: int = 0                # test-only: the step whose verify produced this result


def prefill_result(batch_output, batch, next_draft_input=None):
    """A prefill batch's result: one token per request, no accept lengths."""
    return GenerationBatchResult(
        logits_output=batch_output.logits_output,
        next_token_ids=batch_output.next_token_ids,
        next_draft_input=next_draft_input,
        new_seq_lens=batch.seq_lens,
        speculative_num_draft_tokens=1,
        forward_ct=batch.forward_ct,
    )
