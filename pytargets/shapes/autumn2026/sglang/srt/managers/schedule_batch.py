"""Mirrors sglang/srt/managers/schedule_batch.py: Req (plain class), ScheduleBatch (a plain
@dataclass whose .reqs is a list of Req) and ModelWorkerBatch (what the workers receive; it
carries .reqs too, as the real one does for grammar/bitmask code)."""
import dataclasses
import enum
from typing import List, Optional

from _sglang_loop import BatchOps, ReqBase


class ForwardMode(enum.IntEnum):
    # Mirrors sglang/srt/model_executor/forward_batch_info.py ForwardMode (subset).
    EXTEND = 1
    DECODE = 2
    IDLE = 3

    def is_extend(self):
        return self == ForwardMode.EXTEND

    def is_decode(self):
        return self == ForwardMode.DECODE

    def is_idle(self):
        return self == ForwardMode.IDLE


class SamplingParams:
    def __init__(self, max_new_tokens):
        self.max_new_tokens = max_new_tokens


class Req(ReqBase):
    def __init__(self, rid, origin_input_ids, sampling_params):
        super().__init__(rid, origin_input_ids, sampling_params)
        # Speculative-decoding counters, as in SGLang: verify passes and accepted drafts
        # (bonus token excluded).
        self.spec_verify_ct = 0
        self.spec_num_correct_drafts = 0


@dataclasses.dataclass
class ModelWorkerBatch:
    forward_mode: ForwardMode
    reqs: List[Req]
    seq_lens: List[int]
    spec_info: object = None
    capture_hidden_mode: int = 0
    is_extend_in_batch: bool = False
    forward_ct: int = 0      # test-only: the scheduler step that launched this batch


@dataclasses.dataclass
class ScheduleBatch(BatchOps):
    reqs: list
    forward_mode: ForwardMode = ForwardMode.DECODE
    spec_algorithm: object = None
    spec_info: object = None
    enable_overlap: bool = True

    def prepare_for_decode(self):
        self.forward_mode = ForwardMode.DECODE

    def get_model_worker_batch(self, forward_ct=0):
        return ModelWorkerBatch(
            forward_mode=self.forward_mode,
            reqs=list(self.reqs),
            seq_lens=[len(r.origin_input_ids) + len(r.output_ids) for r in self.reqs],
            spec_info=self.spec_info,
            is_extend_in_batch=self.forward_mode.is_extend(),
            forward_ct=forward_ct,
        )

    def copy(self):
        # Shallow copy with its own reqs list: what the overlap loop keeps for late processing.
        return ScheduleBatch(reqs=list(self.reqs), forward_mode=self.forward_mode,
                             spec_algorithm=self.spec_algorithm, spec_info=self.spec_info,
                             enable_overlap=self.enable_overlap)
