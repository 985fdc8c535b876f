"""Mirrors sglang/srt/managers/tp_worker.py: the target model worker (here: CPU work)."""
import random

from _sglang_loop import target_forward


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
        h, next_token_ids = target_forward(self, batch.reqs, is_verify)
        return ForwardBatchOutput(LogitsProcessorOutput(hidden_states=h), next_token_ids)
