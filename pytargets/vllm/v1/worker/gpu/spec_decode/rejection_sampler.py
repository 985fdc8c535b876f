"""Mirrors vllm/v1/worker/gpu/spec_decode/rejection_sampler.py: RejectionSampler (a plain class
in Model Runner V2) whose __call__(logits, input_batch, draft_logits=None) decides acceptance.
Here: each draft survives with probability accept_p until the first rejection (seeded)."""
import random

from _workload import stage_work
from vllm.v1.worker.gpu.sample.output import SamplerOutput


class RejectionSampler:
    def __init__(self, sampler, num_speculative_steps, accept_p, seed):
        self.sampler = sampler
        self.num_speculative_steps = num_speculative_steps
        self.accept_p = accept_p
        self.rng = random.Random(seed * 31337 + 11)

    def __call__(self, logits, input_batch, draft_logits=None):
        h = stage_work(logits, 200 * input_batch.num_reqs)
        sampled, num_sampled, num_rejected = [], [], []
        for i, req_id in enumerate(input_batch.req_ids):
            drafts = input_batch.draft_tokens.get(req_id, [])
            n = 0
            while n < len(drafts) and self.rng.random() < self.accept_p:
                n += 1
            bonus = (h >> (i % 20)) % 32000
            sampled.append(list(drafts[:n]) + [bonus])
            num_sampled.append(n + 1)
            num_rejected.append(len(drafts) - n)
        return SamplerOutput(sampled_token_ids=sampled, num_sampled=num_sampled,
                             num_rejected=num_rejected)
