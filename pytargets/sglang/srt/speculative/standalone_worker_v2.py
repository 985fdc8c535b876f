"""Mirrors python/sglang/srt/speculative/standalone_worker_v2.py. The newest stored version
(sgl-project/sglang 0284922b486f, a stored copy not shown to be main's newest: docs/upstream.md) still has StandaloneWorkerV2(EAGLEWorkerV2) with a
StandaloneDraftWorker(EagleDraftWorker) that changes set-up only (its own lm_head), and
spec_info.create_worker at 02a3cd954bab still imports it for STANDALONE: every stage code
object is EAGLE's (EagleDraftWorker.draft, EAGLEWorkerV2.verify, ...)."""
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2


class StandaloneDraftWorker(EagleDraftWorker):
    def init_lm_head(self):
        # The standalone draft model keeps its own embeddings and lm_head.
        self.shares_lm_head = False


class StandaloneWorkerV2(EAGLEWorkerV2):
    draft_worker_cls = StandaloneDraftWorker
