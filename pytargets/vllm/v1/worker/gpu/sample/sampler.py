"""Mirrors vllm/v1/worker/gpu/sample/sampler.py: plain sampling (no drafts in the batch)."""
from _workload import stage_work
from vllm.v1.worker.gpu.sample.output import SamplerOutput


class Sampler:
    def __call__(self, logits, input_batch):
        h = stage_work(logits, 150 * input_batch.num_reqs)
        toks = [[(h >> i) % 32000] for i in range(input_batch.num_reqs)]
        return SamplerOutput(sampled_token_ids=toks, num_sampled=[1] * input_batch.num_reqs,
                             num_rejected=[0] * input_batch.num_reqs)
