"""Mirrors sglang/srt/speculative/spec_info.py: SpeculativeAlgorithm and its worker factory."""
import enum


class SpeculativeAlgorithm(enum.Enum):
    EAGLE = "EAGLE"
    EAGLE3 = "EAGLE3"
    STANDALONE = "STANDALONE"
    FROZEN_KV_MTP = "FROZEN_KV_MTP"
    MULTI_LAYER_EAGLE = "MULTI_LAYER_EAGLE"
    NGRAM = "NGRAM"

    @classmethod
    def from_string(cls, name):
        return cls[name.upper()]

    def is_ngram(self):
        return self == SpeculativeAlgorithm.NGRAM

    def create_worker(self, server_args, target_worker):
        # Imports inside, as SGLang's registry does, so each worker module loads on demand.
        if self in (SpeculativeAlgorithm.EAGLE, SpeculativeAlgorithm.EAGLE3):
            from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2 as cls
        elif self == SpeculativeAlgorithm.STANDALONE:
            from sglang.srt.speculative.standalone_worker_v2 import StandaloneWorkerV2 as cls
        elif self == SpeculativeAlgorithm.FROZEN_KV_MTP:
            from sglang.srt.speculative.frozen_kv_mtp_worker_v2 import FrozenKVMTPWorkerV2 as cls
        elif self == SpeculativeAlgorithm.MULTI_LAYER_EAGLE:
            from sglang.srt.speculative.multi_layer_eagle_worker_v2 import (
                MultiLayerEagleWorkerV2 as cls,
            )
        else:
            from sglang.srt.speculative.ngram_worker import NGRAMWorker as cls
        return cls(server_args, target_worker)
