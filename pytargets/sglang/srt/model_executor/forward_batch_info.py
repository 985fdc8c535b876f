"""Mirrors python/sglang/srt/model_executor/forward_batch_info.py (sgl-project/sglang, no commit pinned: docs/upstream.md): ForwardMode (an IntEnum:
EXTEND=1, DECODE=2, MIXED=3, IDLE=4, TARGET_VERIFY=5, DRAFT_EXTEND_V2=6, as upstream's auto()
values) and ForwardBatch, the tensor-level batch a model runner takes (it carries no requests)."""
import enum


class ForwardMode(enum.IntEnum):
    EXTEND = 1
    DECODE = 2
    MIXED = 3
    IDLE = 4
    TARGET_VERIFY = 5
    DRAFT_EXTEND_V2 = 6

    def is_extend(self):
        return self in (ForwardMode.EXTEND, ForwardMode.MIXED, ForwardMode.DRAFT_EXTEND_V2)

    def is_decode(self):
        return self == ForwardMode.DECODE

    def is_mixed(self):
        return self == ForwardMode.MIXED

    def is_idle(self):
        return self == ForwardMode.IDLE

    def is_target_verify(self):
        return self == ForwardMode.TARGET_VERIFY


class CaptureHiddenMode(enum.IntEnum):
    NULL = 0
    LAST = 1
    FULL = 2


class ForwardBatch:
    """What a model runner forward takes: positions and cache locations, no Req objects."""

    def __init__(self, forward_mode, batch_size, seq_state, spec_info=None):
        self.forward_mode = forward_mode
        self.batch_size = batch_size
        self.seq_state = seq_state      # stand-in for input ids / positions / KV locations
        self.spec_info = spec_info
