"""What both vLLM shapes (pytargets) share: Request, InputBatch, SamplerOutput, Sampler and
RejectionSampler, re-exported at their upstream paths (vllm/v1/request.py,
vllm/v1/worker/gpu/input_batch.py, sample/output.py, sample/sampler.py,
spec_decode/rejection_sampler.py), and the runner's target forward and sampling step. None of
them is a stage a spec watches.
RejectionSampler.__call__(logits, input_batch, draft_logits=None) decides acceptance: each draft
survives with probability accept_p until the first rejection (seeded)."""
import dataclasses
import enum
import random
import time
from typing import Dict, List, Optional

import _groundtruth

from _workload import stage_work


@dataclasses.dataclass
class SamplerOutput:
    sampled_token_ids: List[List[int]]      # per request: accepted drafts + the sampled tokens (1 or more)
    logprobs_tensors: object = None
    num_nans: object = None
    num_sampled: Optional[List[int]] = None
    num_rejected: Optional[List[int]] = None


class Sampler:
    def __init__(self, sampled_per_step=1):
        self.sampled_per_step = sampled_per_step   # tokens a step samples (1 for a plain LLM)

    def __call__(self, logits, input_batch):
        h = stage_work(logits, 150 * input_batch.num_reqs)
        k = self.sampled_per_step
        toks = [[(h >> i) % 32000 + j for j in range(k)] for i in range(input_batch.num_reqs)]
        return SamplerOutput(sampled_token_ids=toks, num_sampled=[k] * input_batch.num_reqs,
                             num_rejected=[0] * input_batch.num_reqs)


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
            k = self.sampler.sampled_per_step
            sampled.append(list(drafts[:n]) + [bonus + j for j in range(k)])
            num_sampled.append(n + k)
            num_rejected.append(len(drafts) - n)
        return SamplerOutput(sampled_token_ids=sampled, num_sampled=num_sampled,
                             num_rejected=num_rejected)


class RequestStatus(enum.IntEnum):
    WAITING = 1
    RUNNING = 2
    FINISHED_LENGTH_CAPPED = 3


class Request:
    def __init__(self, request_id, prompt_token_ids, max_tokens):
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.max_tokens = max_tokens
        self.output_token_ids = []
        self.spec_token_ids = []
        self.num_computed_tokens = 0
        self.num_output_placeholders = 0
        self.status = RequestStatus.WAITING
        # test-only totals, for the summary
        self.num_spec_verifies = 0
        self.num_accepted_drafts = 0

    def is_finished(self):
        return self.status == RequestStatus.FINISHED_LENGTH_CAPPED


@dataclasses.dataclass
class InputBatch:
    """The per-step batch a runner builds (requests in the runner's order)."""
    req_ids: List[str]
    num_scheduled_tokens: List[int]
    draft_tokens: Dict[str, List[int]]   # req_id -> the draft tokens being verified this step
    step: int = 0                        # test-only: the engine step

    @property
    def num_reqs(self):
        return len(self.req_ids)

    @property
    def num_draft_tokens(self):
        return sum(len(v) for v in self.draft_tokens.values())

    @classmethod
    def make_dummy(cls, num_reqs, num_tokens):
        return cls(req_ids=["_dummy_req_%d" % i for i in range(num_reqs)],
                   num_scheduled_tokens=[max(1, num_tokens // max(1, num_reqs))] * num_reqs,
                   draft_tokens={})


def target_forward(work_rng, input_batch):
    """Target forward over prompt chunks and (1 + K)-token verify queries: the logits stand-in."""
    n_tokens = sum(min(n, 64) for n in input_batch.num_scheduled_tokens)
    return stage_work(n_tokens, int((1500 + 250 * n_tokens) * work_rng.uniform(0.8, 1.25)),
                      blocks=2 + input_batch.num_reqs)


def sample(runner, input_batch, logits, draft_logits=None):
    """The sampling step: plain sampling, or the rejection sampler when the batch verifies
    drafts (logged as an event); each request's last token is kept for its next draft."""
    if input_batch.num_draft_tokens == 0:
        out = runner.sampler(logits, input_batch)
    else:
        t0 = time.time_ns()
        out = runner.rejection_sampler(logits, input_batch, draft_logits)
        t1 = time.time_ns()
        _groundtruth.truth().event("rejection_sample", start_ns=t0, end_ns=t1,
                                   rids=list(input_batch.req_ids), step=input_batch.step,
                                   method="RejectionSampler.__call__")
    for rid, toks in zip(input_batch.req_ids, out.sampled_token_ids):
        runner.last_sampled[rid] = toks[-1]
    return out
