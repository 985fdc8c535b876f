"""Mirrors sglang/srt/speculative/base_spec_worker.py."""
from abc import ABC, abstractmethod


class BaseDraftWorker(ABC):
    @abstractmethod
    def draft(self, model_worker_batch):
        ...

    @abstractmethod
    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids):
        ...

    @abstractmethod
    def _draft_extend_for_decode(self, batch, batch_result):
        ...


class BaseSpecWorker(ABC):
    @property
    @abstractmethod
    def target_worker(self):
        ...

    @property
    @abstractmethod
    def draft_worker(self):
        ...

    @abstractmethod
    def clear_cache_pool(self):
        ...

    def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size=0):
        """Hook called by the scheduler's result processor once the accept counts of a verify
        are on the host (one loop later under overlap scheduling). The list is index-aligned
        with batch.reqs; counts exclude the bonus token. Default: keep running totals."""
        self.verify_complete_calls = getattr(self, "verify_complete_calls", 0) + 1
        self.total_correct_drafts = getattr(self, "total_correct_drafts", 0) + sum(
            num_correct_drafts_per_req)
