"""Mirrors sglang/srt/speculative/standalone_worker_v2.py: StandaloneWorkerV2(EAGLEWorkerV2)
with a StandaloneDraftWorker that only changes set-up (its own lm_head). draft and the
draft-extend methods are inherited: their code objects are EagleDraftWorker's, and
StandaloneWorkerV2.verify/forward_batch_generation are EAGLEWorkerV2's."""
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2


class StandaloneDraftWorker(EagleDraftWorker):
    def init_lm_head(self):
        # The standalone draft model keeps its own embeddings and lm_head.
        self.shares_lm_head = False


class StandaloneWorkerV2(EAGLEWorkerV2):
    draft_worker_cls = StandaloneDraftWorker
