"""Mirrors sglang/srt/managers/tp_worker.py: the target model worker (here: CPU work)."""
import random

from _workload import stage_work


class LogitsProcessorOutput:
    def __init__(self, hidden_states):
        self.hidden_states = hidden_states
        self.next_token_logits = None


class ForwardBatchOutput:
    def __init__(self, logits_output, next_token_ids):
        self.logits_output = logits_output
        self.next_token_ids = next_token_ids
        self.can_run_cuda_graph = False


class TpModelWorker:
    def __init__(self, server_args, seed):
        self.server_args = server_args
        self.work_rng = random.Random(seed * 7919 + 1)

    def get_memory_pool(self):
        return None, None

    def forward_batch_generation(self, model_worker_batch=None, forward_batch=None, is_verify=False,
                                 skip_attn_backend_init=False):
        batch = model_worker_batch if model_worker_batch is not None else forward_batch
        bs = len(batch.reqs)
        if is_verify:
            per_req = self.server_args.speculative_num_draft_tokens
            iters = int((2000 + 800 * bs) * self.work_rng.uniform(0.8, 1.25))
        else:
            per_req = 1
            iters = int((1000 + 800 * bs) * self.work_rng.uniform(0.8, 1.25))
        h = 0
        for r in batch.reqs:
            h ^= r.seq_state
        h = stage_work(h, iters, blocks=2 + bs)
        next_token_ids = [(h >> (i % 24)) % 32000 + i for i in range(bs * per_req)]
        return ForwardBatchOutput(LogitsProcessorOutput(hidden_states=h), next_token_ids)
