"""Mirrors python/sglang/srt/managers/tp_worker.py (sgl-project/sglang, no commit pinned: docs/upstream.md): the target model worker (here: CPU work).
Since the ModelWorkerBatch removal it takes the ScheduleBatch, or a ready ForwardBatch for a
verify (batch=None)."""
import random

from _sglang_loop import target_forward


class LogitsProcessorOutput:
    def __init__(self, hidden_states):
        self.hidden_states = hidden_states
        self.next_token_logits = None
        self.mm_input_embeds = None


class ForwardBatchOutput:
    def __init__(self, logits_output, next_token_ids):
        self.logits_output = logits_output
        self.next_token_ids = next_token_ids
        self.can_run_cuda_graph = False
        self.new_seq_lens = None
        self.next_draft_input = None


class TpModelWorker:
    def __init__(self, server_args, seed):
        self.server_args = server_args
        self.work_rng = random.Random(seed * 7919 + 1)

    def get_memory_pool(self):
        return None, None

    def forward_batch_generation(self, batch=None, forward_batch=None, pp_proxy_tensors=None,
                                 is_verify=False, skip_attn_backend_init=False,
                                 capture_hidden_mode=None, reqs=None):
        # reqs: test-only, the requests behind a forward_batch (their state feeds the work).
        reqs = batch.reqs if batch is not None else reqs
        h, next_token_ids = target_forward(self, reqs, is_verify)
        return ForwardBatchOutput(LogitsProcessorOutput(hidden_states=h), next_token_ids)
