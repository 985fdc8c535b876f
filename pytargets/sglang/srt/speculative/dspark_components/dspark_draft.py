"""Mirrors python/sglang/srt/speculative/dspark_components/dspark_draft.py (sgl-project/sglang, no commit pinned: docs/upstream.md): DraftBlockProposer,
whose propose(self, *, batch, draft_input, verify_window, bs, device, target_model,
sampling_info) drafts a DSpark block (all keyword-only: batch is still a local of its frame),
and resolve_greedy_mask (also used by DFlash)."""
import random

from _workload import stage_work


def resolve_greedy_mask(*, bs, sampling_info, device=None):
    return [True] * bs


class DraftProposal:
    def __init__(self, draft_tokens):
        self.draft_tokens = draft_tokens


class DraftBlockProposer:
    def __init__(self, gamma, seed):
        self.gamma = gamma
        self.work_rng = random.Random(seed * 104729 + 3)

    def propose(self, *, batch, draft_input, verify_window, bs, device, target_model, sampling_info):
        tokens = []
        for r in batch.reqs:
            h = stage_work(r.seq_state, int((300 + 150 * self.gamma) * self.work_rng.uniform(0.8, 1.25)),
                           blocks=1)
            r.seq_state = h
            tokens.extend((h >> (3 * j)) % 32000 for j in range(self.gamma + 1))
        return DraftProposal(tokens)
