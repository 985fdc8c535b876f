"""Mirrors python/sglang/srt/managers/schedule_batch.py (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md; Req's
counters as updated in batch_result_processor.py at df80246e0a3e): Req (plain class) and
ScheduleBatch, the batch every spec-v2 worker method now takes (ModelWorkerBatch is gone from
the workers' signatures)."""
import dataclasses
from typing import List, Optional

from _sglang_loop import BatchOps, ReqBase
from sglang.srt.model_executor.forward_batch_info import ForwardMode


class SamplingParams:
    def __init__(self, max_new_tokens):
        self.max_new_tokens = max_new_tokens


class ReqKV:
    def __init__(self, kv_committed_len=0, kv_allocated_len=0, req_pool_idx=None):
        self.kv_committed_len = kv_committed_len
        self.kv_allocated_len = kv_allocated_len
        self.req_pool_idx = req_pool_idx


class Req(ReqBase):
    def __init__(self, rid, origin_input_ids, sampling_params):
        super().__init__(rid, origin_input_ids, sampling_params)
        # main keeps the KV lengths on req.kv (kv_committed_len, kv_allocated_len, req_pool_idx)
        self.kv = ReqKV(kv_committed_len=len(origin_input_ids))
        # Speculative-decoding counters, as upstream: verify passes, correct drafts (bonus
        # token excluded) and a histogram of correct drafts per verify. Updated when a
        # verify's accept lengths reach the host, for requests neither finished nor retracted.
        self.spec_verify_ct = 0
        self.spec_num_correct_drafts = 0
        self.spec_correct_drafts_histogram: List[int] = []

    def update_spec_correct_drafts_histogram(self, num_correct_drafts):
        hist = self.spec_correct_drafts_histogram
        if len(hist) <= num_correct_drafts:
            hist.extend([0] * (num_correct_drafts - len(hist) + 1))
        hist[num_correct_drafts] += 1


@dataclasses.dataclass
class ScheduleBatch(BatchOps):
    reqs: list
    forward_mode: ForwardMode = ForwardMode.DECODE
    spec_algorithm: object = None
    spec_info: object = None
    enable_overlap: bool = True
    is_extend_in_batch: bool = False
    seq_lens: Optional[List[int]] = None
    capture_hidden_mode: int = 0
    has_grammar: bool = False
    forward_ct: int = 0      # test-only: the scheduler step that launched this batch

    def prepare_for_extend(self):
        self.forward_mode = ForwardMode.EXTEND
        self.is_extend_in_batch = True
        self._seq_lens()

    def prepare_for_decode(self):
        self.forward_mode = ForwardMode.DECODE
        self.is_extend_in_batch = False
        self._seq_lens()

    def _seq_lens(self):
        self.seq_lens = [len(r.origin_input_ids) + len(r.output_ids) for r in self.reqs]

    def copy(self):
        # Shallow copy with its own reqs list: what the overlap loop keeps for late processing.
        return ScheduleBatch(reqs=list(self.reqs), forward_mode=self.forward_mode,
                             spec_algorithm=self.spec_algorithm, spec_info=self.spec_info,
                             enable_overlap=self.enable_overlap, seq_lens=self.seq_lens,
                             forward_ct=self.forward_ct)
