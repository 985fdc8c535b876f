"""Mirrors python/sglang/srt/speculative/spec_info.py (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md):
SpeculativeAlgorithm, its plugin hook register(), and create_worker(server_args), which imports
each worker's module only when that worker is chosen (the module a process imported is how the
catalog tells the variants apart). It returns the class; the scheduler builds the worker with
(server_args, gpu_id, nccl_port, target_worker) as main's workers take them at 13a7ffeceaf3
(HYBRID, a branch, still adds ps)."""
import enum

from sglang.srt.speculative.spec_registry import get_spec as _get_registered_spec
from sglang.srt.speculative.spec_registry import register_algorithm as _register_algorithm


class SpeculativeAlgorithm(enum.Enum):
    DFLASH = enum.auto()
    UNO = enum.auto()
    DSPARK = enum.auto()
    EAGLE = enum.auto()
    EAGLE3 = enum.auto()
    FROZEN_KV_MTP = enum.auto()
    STANDALONE = enum.auto()
    NGRAM = enum.auto()
    HYBRID = enum.auto()
    NONE = enum.auto()

    @classmethod
    def from_string(cls, name):
        if name is None:
            return cls.NONE
        try:
            return cls[name.upper()]
        except KeyError:
            pass
        spec = _get_registered_spec(name)
        if spec is not None:
            return spec
        raise ValueError("Unknown speculative algorithm name: %s" % name)

    @classmethod
    def register(cls, name, *, supports_overlap=False, validate_server_args=None, **kw):
        """Decorator registering a plugin algorithm; the factory returns the worker class."""
        return _register_algorithm(name, supports_overlap=supports_overlap,
                                   validate_server_args=validate_server_args, **kw)

    def is_none(self):
        return self == SpeculativeAlgorithm.NONE

    def is_eagle(self):
        return self in (SpeculativeAlgorithm.EAGLE, SpeculativeAlgorithm.EAGLE3,
                        SpeculativeAlgorithm.FROZEN_KV_MTP, SpeculativeAlgorithm.HYBRID)

    def is_standalone(self):
        return self == SpeculativeAlgorithm.STANDALONE

    def is_ngram(self):
        return self == SpeculativeAlgorithm.NGRAM

    def is_hybrid(self):
        return self == SpeculativeAlgorithm.HYBRID

    def create_worker(self, server_args):
        if self == SpeculativeAlgorithm.DFLASH:
            from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2
            return DFlashWorkerV2
        if self == SpeculativeAlgorithm.UNO:
            from sglang.srt.speculative.uno_worker_v2 import UnoWorkerV2
            return UnoWorkerV2
        if self == SpeculativeAlgorithm.DSPARK:
            from sglang.srt.speculative.dspark_components.dspark_worker_v2 import DSparkWorkerV2
            return DSparkWorkerV2
        if self == SpeculativeAlgorithm.FROZEN_KV_MTP:
            from sglang.srt.speculative.frozen_kv_mtp_worker_v2 import FrozenKVMTPWorkerV2
            return FrozenKVMTPWorkerV2
        if self.is_hybrid():
            from sglang.srt.speculative.hybrid_controller import HybridController
            return HybridController
        if self.is_eagle() and server_args.enable_multi_layer_eagle:
            from sglang.srt.speculative.multi_layer_eagle_worker_v2 import MultiLayerEagleWorkerV2
            return MultiLayerEagleWorkerV2
        if self.is_eagle():
            from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
            return EAGLEWorkerV2
        if self.is_standalone():
            from sglang.srt.speculative.standalone_worker_v2 import StandaloneWorkerV2
            return StandaloneWorkerV2
        if self.is_ngram():
            from sglang.srt.speculative.ngram_worker import NGRAMWorker
            return NGRAMWorker
        raise ValueError("Unreachable code path in create_worker.")
