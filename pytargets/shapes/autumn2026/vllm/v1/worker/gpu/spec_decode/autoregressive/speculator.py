"""Mirrors vllm/v1/worker/gpu/spec_decode/autoregressive/speculator.py: AutoRegressiveSpeculator
owns propose() (decorated with inference_mode, as in vLLM); EagleSpeculator inherits it, so the
code object behind EagleSpeculator.propose is AutoRegressiveSpeculator.propose.__wrapped__."""
import random

import _faults
from _workload import stage_work
from vllm._compat.torch_shim import inference_mode


class AutoRegressiveSpeculator:
    def __init__(self, num_speculative_steps, seed):
        self.num_speculative_steps = num_speculative_steps
        self.work_rng = random.Random(seed * 104729 + 3)
        self.draft_logits = None

    @inference_mode()
    def propose(self, input_batch, last_hidden_states, aux_hidden_states, num_sampled,
                num_rejected, last_sampled, next_prefill_tokens, temperature=None, seeds=None,
                dummy_run=False, mm_inputs=None):
        if _faults.want_hold("AutoRegressiveSpeculator.propose"):
            try:
                raise _faults.HeldFrame()
            except _faults.HeldFrame as e:
                _faults.hold(e.__traceback__, "AutoRegressiveSpeculator.propose",
                             input_batch.step, "traceback")
        draft_tokens = []
        h = last_hidden_states
        for i in range(input_batch.num_reqs):
            # draft prefill + (K-1) draft decode steps
            h = stage_work(h ^ last_sampled[i], int((300 + 150 * self.num_speculative_steps)
                                                    * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            draft_tokens.append([(h >> (3 * j)) % 32000 for j in range(self.num_speculative_steps)])
        return draft_tokens
