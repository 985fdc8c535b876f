"""Mirrors python/sglang/srt/speculative/base_spec_worker.py (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md):
BaseSpecWorker and EagleDraftWorkerBase (the base of the EAGLE-family draft workers; older
releases called it BaseDraftWorker)."""
from abc import ABC


class EagleDraftWorkerBase(ABC):
    def draft(self, batch):
        raise NotImplementedError

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids):
        raise NotImplementedError

    def _draft_extend_for_decode(self, batch, batch_result):
        raise NotImplementedError


class BaseSpecWorker(ABC):
    # test-only: set by a HybridController on the workers it routes to, so their verify is
    # logged as a nested call of the controller's (the frame the HYBRID spec watches).
    nested = False

    @property
    def target_worker(self):
        return self._target_worker

    @property
    def draft_worker(self):
        return self._draft_worker

    def clear_cache_pool(self):
        pass

    def activate_step_by_batch(self, batch_size):
        pass

    def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size=0):
        """Called by the scheduler's result processor once the accept counts of a verify are
        on the host (one loop later under overlap scheduling). The list is index-aligned with
        batch.reqs; counts exclude the bonus token. Here: running totals for the summary."""
        self.verify_complete_calls = getattr(self, "verify_complete_calls", 0) + 1
        self.total_correct_drafts = getattr(self, "total_correct_drafts", 0) + sum(
            num_correct_drafts_per_req)
