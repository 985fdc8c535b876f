"""Mirrors vllm/v1/worker/gpu/model_runner.py (vllm-project/vllm 0036d38de46c, a stored copy not shown to be main's newest: docs/upstream.md), Model Runner V2:
GPUModelRunner.execute_model(self, scheduler_output, intermediate_tensors=None, dummy_run=False,
skip_attn_for_dummy_run=False, is_profile=False, context_len=0) runs the target forward over
the scheduled tokens, the draft tokens being verified included (the "verify" stage);
sample_tokens(self, grammar_output) runs RejectionSampler.__call__ (acceptance) and then
speculator.propose(input_batch, ...) by position (the draft the next step verifies). Both are
decorated with torch.inference_mode (sample_tokens also with step_eplb_after). _dummy_run
(memory profiling, CUDA graph capture, and a DP rank with nothing to run) calls
execute_model(..., dummy_run=True) on requests "_dummy_req_<i>" and propose(..., dummy_run=True)
by name. The batch's requests are ordered by sort_batch_req_ids (verifying and decoding
requests first, then prefills).

Upstream this runs in the worker process (VLLM::Worker, or VLLM::Worker_TP<r> with TP > 1) or,
with one GPU, in the EngineCore process; here both live in one process and one thread (see
vllm/v1/engine/core.py). Ground-truth lines are written by the caller right around each call."""
import random
import sys
import time

import _faults
from _groundtruth import ids, truth
from _vllm_shared import sample, target_forward
from _workload import stage_work
from vllm._compat.torch_shim import inference_mode
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.worker.gpu.eplb_utils import step_eplb_after
from vllm.v1.worker.gpu.input_batch import InputBatch
from vllm.v1.worker.gpu.sample.sampler import Sampler
from vllm.v1.worker.gpu.spec_decode import init_speculator
from vllm.v1.worker.gpu.spec_decode.rejection_sampler import RejectionSampler


class ExecuteModelState:
    def __init__(self, input_batch, logits, hidden_states):
        self.input_batch = input_batch
        self.logits = logits
        self.hidden_states = hidden_states


def sort_batch_req_ids(num_tokens_per_req, draft_tokens, decode_query_len):
    # Order verification/decode -> short_extend -> prefill.
    key = lambda r: (not draft_tokens.get(r), num_tokens_per_req[r] != decode_query_len,
                     num_tokens_per_req[r])
    return sorted(num_tokens_per_req, key=key)


class GPUModelRunner:
    def __init__(self, vllm_config, device=None):
        k = vllm_config.speculative_config.num_speculative_tokens
        self.num_speculative_steps = k
        self.decode_query_len = 1 + k
        self.sampler = Sampler(vllm_config.sampled_per_step)
        self.speculator = init_speculator(vllm_config, device, None)  # upstream: self.req_states
        self.rejection_sampler = RejectionSampler(self.sampler, k, vllm_config.accept_p, vllm_config.seed)
        self.work_rng = random.Random(vllm_config.seed * 7919 + 1)
        self.execute_model_state = None
        self.last_sampled = {}
        self._draft_token_ids = None

    @inference_mode()
    def execute_model(self, scheduler_output, intermediate_tensors=None, dummy_run=False,
                      skip_attn_for_dummy_run=False, is_profile=False, context_len=0):
        nst = scheduler_output.num_scheduled_tokens
        if dummy_run:
            input_batch = InputBatch.make_dummy(len(nst), scheduler_output.total_num_scheduled_tokens)
        else:
            _faults.verify_entered(lambda: stage_work(len(nst), 4000))
            if _faults.want_hold("GPUModelRunner.execute_model"):
                _faults.hold(sys._getframe(), "GPUModelRunner.execute_model", scheduler_output.step, "frame")
            drafts = scheduler_output.scheduled_spec_decode_tokens
            req_ids = sort_batch_req_ids(nst, drafts, self.decode_query_len)
            input_batch = InputBatch(req_ids=req_ids, num_scheduled_tokens=[nst[r] for r in req_ids],
                                     draft_tokens=dict(drafts), step=scheduler_output.step)
        h = target_forward(self.work_rng, input_batch)
        self.execute_model_state = ExecuteModelState(input_batch, logits=h, hidden_states=h >> 3)
        return None

    @inference_mode()
    @step_eplb_after()
    def sample_tokens(self, grammar_output=None):
        state, self.execute_model_state = self.execute_model_state, None
        input_batch = state.input_batch
        T = truth()
        sampler_output = sample(self, input_batch, state.logits, self.speculator.draft_logits)
        if self.speculator is not None:
            t0 = time.time_ns()
            draft_tokens = self.speculator.propose(
                input_batch, None, None, state.hidden_states, None,
                sampler_output.num_sampled, sampler_output.num_rejected,
                [self.last_sampled[r] for r in input_batch.req_ids], None, None, None)
            t1 = time.time_ns()
            T.stage("draft", t0, t1, ids(input_batch.req_ids), input_batch.step,
                    method=_qualname(type(self.speculator).propose))
            self._draft_token_ids = (list(input_batch.req_ids), draft_tokens)
        return ModelRunnerOutput(
            req_ids=list(input_batch.req_ids),
            req_id_to_index={r: i for i, r in enumerate(input_batch.req_ids)},
            sampled_token_ids=sampler_output.sampled_token_ids,
        )

    @inference_mode()
    @step_eplb_after(is_dummy=True)
    def _dummy_run(self, num_tokens, *args, skip_attn=False, uniform_decode=False,
                   context_len=0, skip_eplb=False, is_profile=False, **kwargs):
        num_reqs = max(1, min(num_tokens, 4))
        so = SchedulerOutput.make_empty()
        so.total_num_scheduled_tokens = num_tokens
        so.num_scheduled_tokens = {"_dummy_req_%d" % i: max(1, num_tokens // num_reqs) for i in range(num_reqs)}
        self.execute_model(so, intermediate_tensors=None, dummy_run=True,
                           skip_attn_for_dummy_run=skip_attn, is_profile=is_profile,
                           context_len=context_len)
        state, self.execute_model_state = self.execute_model_state, None
        if self.speculator is not None:
            n = state.input_batch.num_reqs
            self.speculator.propose(
                input_batch=state.input_batch, attn_metadata=None, slot_mappings=None,
                last_hidden_states=state.hidden_states, aux_hidden_states=None,
                num_sampled=[1] * n, num_rejected=[0] * n, last_sampled=[0] * n,
                next_prefill_tokens=None, temperature=None, seeds=None, dummy_run=True,
                skip_attn_for_dummy_run=skip_attn, mm_inputs=None, is_profile=is_profile)
        return state.hidden_states, None

    def take_draft_token_ids(self):
        out, self._draft_token_ids = self._draft_token_ids, None
        return out


def _qualname(f):
    while hasattr(f, "__wrapped__"):
        f = f.__wrapped__
    return f.__qualname__

