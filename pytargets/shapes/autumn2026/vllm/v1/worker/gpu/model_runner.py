"""Mirrors vllm/v1/worker/gpu/model_runner.py (Model Runner V2, vLLM's default runner):
GPUModelRunner.execute_model(scheduler_output) runs the target forward over the scheduled
tokens, including the draft tokens being verified (the "verify" stage); sample_tokens() then
runs RejectionSampler.__call__ (acceptance) and speculator.propose (the draft for the next
step). Both are decorated with inference_mode, as in vLLM.

In the real engine this runs in the GPU worker process and the scheduler in the EngineCore
process; here both live in one process and one thread (see vllm/v1/engine/core.py).
Ground-truth lines are written by the caller right around each stage call."""
import random
import sys
import time

import _faults
from _groundtruth import truth
from _vllm_shared import sample, target_forward
from _workload import stage_work
from vllm._compat.torch_shim import inference_mode
from vllm.v1.worker.gpu.input_batch import InputBatch
from vllm.v1.worker.gpu.sample.sampler import Sampler
from vllm.v1.worker.gpu.spec_decode.eagle.speculator import EagleSpeculator
from vllm.v1.worker.gpu.spec_decode.rejection_sampler import RejectionSampler


class ModelRunnerOutput:
    def __init__(self, req_ids, req_id_to_index, sampled_token_ids):
        self.req_ids = req_ids
        self.req_id_to_index = req_id_to_index
        self.sampled_token_ids = sampled_token_ids


class ExecuteModelState:
    def __init__(self, input_batch, logits, hidden_states):
        self.input_batch = input_batch
        self.logits = logits
        self.hidden_states = hidden_states


class GPUModelRunner:
    def __init__(self, num_speculative_steps, accept_p, seed):
        self.num_speculative_steps = num_speculative_steps
        self.sampler = Sampler()
        self.speculator = EagleSpeculator(num_speculative_steps, seed)
        self.rejection_sampler = RejectionSampler(self.sampler, num_speculative_steps, accept_p, seed)
        self.work_rng = random.Random(seed * 7919 + 1)
        self.execute_model_state = None
        self.last_sampled = {}
        self._draft_token_ids = None

    @inference_mode()
    def execute_model(self, scheduler_output, intermediate_tensors=None):
        _faults.verify_entered(lambda: stage_work(len(scheduler_output.req_ids), 4000))
        if _faults.want_hold("GPUModelRunner.execute_model"):
            _faults.hold(sys._getframe(), "GPUModelRunner.execute_model", scheduler_output.step, "frame")
        input_batch = InputBatch(
            req_ids=list(scheduler_output.req_ids),
            num_scheduled_tokens=[scheduler_output.num_scheduled_tokens[r] for r in scheduler_output.req_ids],
            draft_tokens=dict(scheduler_output.scheduled_spec_decode_tokens),
            step=scheduler_output.step,
        )
        h = target_forward(self.work_rng, input_batch)
        self.execute_model_state = ExecuteModelState(input_batch, logits=h, hidden_states=h >> 3)
        return None

    @inference_mode()
    def sample_tokens(self, grammar_output=None):
        state, self.execute_model_state = self.execute_model_state, None
        input_batch = state.input_batch
        T = truth()
        sampler_output = sample(self, input_batch, state.logits, self.speculator.draft_logits)
        if self.speculator is not None:
            t0 = time.time_ns()
            draft_tokens = self.speculator.propose(
                input_batch,
                state.hidden_states,
                None,
                sampler_output.num_sampled,
                sampler_output.num_rejected,
                [self.last_sampled[r] for r in input_batch.req_ids],
                None,
            )
            t1 = time.time_ns()
            T.stage("draft", t0, t1, _Rids(input_batch.req_ids), input_batch.step,
                    method="EagleSpeculator.propose")
            self._draft_token_ids = (list(input_batch.req_ids), draft_tokens)
        return ModelRunnerOutput(
            req_ids=list(input_batch.req_ids),
            req_id_to_index={r: i for i, r in enumerate(input_batch.req_ids)},
            sampled_token_ids=sampler_output.sampled_token_ids,
        )

    def take_draft_token_ids(self):
        out, self._draft_token_ids = self._draft_token_ids, None
        return out


class _Rid:
    __slots__ = ("rid",)

    def __init__(self, rid):
        self.rid = rid


def _Rids(req_ids):
    return [_Rid(r) for r in req_ids]
