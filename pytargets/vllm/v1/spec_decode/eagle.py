"""Mirrors vllm/v1/spec_decode/eagle.py (vllm-project/vllm, no commit pinned: docs/upstream.md): EagleProposer, the V1 runner's EAGLE drafter
(propose, and dummy_run for profiling and DP idle steps)."""
import random

from _workload import stage_work


class EagleProposer:
    def __init__(self, num_speculative_tokens, seed):
        self.k = num_speculative_tokens
        self.work_rng = random.Random(seed * 104729 + 3)

    def propose(self, target_token_ids, target_hidden_states, last_sampled):
        out, h = [], target_hidden_states
        for t in last_sampled:
            h = stage_work(h ^ t, int((300 + 150 * self.k) * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            out.append([(h >> (3 * j)) % 32000 for j in range(self.k)])
        return out

    def dummy_run(self, num_tokens):
        stage_work(num_tokens, 200)
