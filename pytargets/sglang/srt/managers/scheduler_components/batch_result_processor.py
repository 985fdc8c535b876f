"""Mirrors python/sglang/srt/managers/scheduler_components/batch_result_processor.py
(sgl-project/sglang df80246e0a3e, a stored copy not shown to be main's newest, with main's
accept count, accept_len - num_non_draft_tokens_per_req, and req.kv: docs/upstream.md): SchedulerBatchResultProcessor, a frozen, slotted,
keyword-only dataclass. process_batch_result_decode(batch, result) ->
_normalize_decode_outputs(batch=, result=, ...) -> _resolve_spec_v2_tokens(result, batch), where a
verify's accept lengths reach the host (one loop later under overlap scheduling) and the
requests' spec counters are updated."""
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
        next_token_ids = self._normalize_decode_outputs(
            batch=batch, result=result, logits_output=result.logits_output,
            next_token_ids=result.next_token_ids)
        for req, toks in zip(batch.reqs, next_token_ids):
            if self.enable_overlap and (req.finished() or req.is_retracted):
                # Overlap scheduling ran it one step past its end: its tokens are dropped.
                continue
            req.output_ids.extend(toks)
            self._check_finished(req)
        self.stream_output(batch.reqs)

    def _normalize_decode_outputs(self, *, batch, result, logits_output, next_token_ids):
        return self._resolve_spec_v2_tokens(result, batch)

    def _resolve_spec_v2_tokens(self, result, batch) -> List[List[int]]:
        """Resolve the padded next token ids for spec-v2 (overlap and non-overlap)."""
        next_token_ids = result.next_token_ids
        accept_lens = result.accept_lens
        # Each accept length counts the request's non-draft tokens too: the bonus (1), and
        # for UNO a second one (GenerationBatchResult.num_non_draft_tokens_per_req = 2).
        non_draft = result.num_non_draft_tokens_per_req
        result.num_correct_drafts = sum(accept_lens) - non_draft * len(batch.reqs)
        result.num_correct_drafts_per_req_cpu = [x - non_draft for x in accept_lens]

        # Feed the worker now that the accept lengths are on the host.
        self.model_worker.on_verify_complete_cpu(
            result.num_correct_drafts_per_req_cpu, batch_size=len(batch.reqs))

        stride = result.speculative_num_draft_tokens
        predict_tokens = []
        for i, req in enumerate(batch.reqs):
            accept_tokens = next_token_ids[i * stride: i * stride + accept_lens[i]]
            if not (req.is_retracted or req.finished()):
                req.kv.kv_committed_len += len(accept_tokens)
                req.spec_verify_ct += 1
                n = result.num_correct_drafts_per_req_cpu[i]
                req.spec_num_correct_drafts += n
                req.update_spec_correct_drafts_histogram(n)
            predict_tokens.append(accept_tokens)
        truth().accept(result.forward_ct, batch.reqs, result.num_correct_drafts_per_req_cpu)
        return predict_tokens
