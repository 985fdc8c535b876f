"""Mirrors sglang/srt/managers/scheduler_components/batch_result_processor.py:
SchedulerBatchResultProcessor (a frozen, slotted, keyword-only dataclass as in SGLang).
_resolve_spec_v2_tokens(result, batch) is where a verify's accept counts reach the host: under
overlap scheduling that is one loop later, after the next batch was launched."""
import dataclasses
from typing import Any, List

from _groundtruth import truth
from _sglang_loop import ResultProcessorBase


@dataclasses.dataclass(kw_only=True, slots=True, frozen=True)
class SchedulerBatchResultProcessor(ResultProcessorBase):
    is_generation: bool
    enable_overlap: bool
    server_args: Any
    model_worker: Any
    stats: Any   # a dict: finished requests etc.

    def process_batch_result_decode(self, batch, result):
        predict_tokens = self._resolve_spec_v2_tokens(result, batch)
        for req, toks in zip(batch.reqs, predict_tokens):
            if req.finished():
                # Overlap scheduling ran it one step past its end: its tokens are dropped.
                continue
            req.output_ids.extend(toks)
            self._check_finished(req)
        self.stream_output(batch.reqs)

    def _resolve_spec_v2_tokens(self, result, batch) -> List[List[int]]:
        """Resolve the padded next token ids for spec-v2 (overlap and non-overlap)."""
        next_token_ids = result.next_token_ids
        accept_lens = result.accept_lens
        result.num_correct_drafts = sum(accept_lens) - len(batch.reqs)
        result.num_correct_drafts_per_req_cpu = [x - 1 for x in accept_lens]

        # Feed the worker now that the accept lengths are on the host.
        self.model_worker.on_verify_complete_cpu(
            result.num_correct_drafts_per_req_cpu, batch_size=len(batch.reqs))

        stride = result.speculative_num_draft_tokens
        predict_tokens = []
        for i, req in enumerate(batch.reqs):
            predict_tokens.append(next_token_ids[i * stride: i * stride + accept_lens[i]])
            req.spec_verify_ct += 1
            req.spec_num_correct_drafts += result.num_correct_drafts_per_req_cpu[i]
        truth().accept(result.forward_ct, batch.reqs, result.num_correct_drafts_per_req_cpu)
        return predict_tokens
