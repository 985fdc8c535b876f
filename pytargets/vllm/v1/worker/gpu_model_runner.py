"""Mirrors vllm/v1/worker/gpu_model_runner.py (vllm-project/vllm 000fc94b754f, a stored copy not shown to be main's newest: docs/upstream.md), the V1
GPUModelRunner that MoE and other non-default models still run: execute_model(self,
scheduler_output, intermediate_tensors=None) is the target forward (verify); sample_tokens(self,
grammar_output) runs the rejection sampler and, through a local closure, calls
propose_draft_token_ids(self, scheduler_output, sampled_token_ids, sampling_metadata,
hidden_states, sample_hidden_states, aux_hidden_states, spec_decode_metadata,
common_attn_metadata, slot_mappings), which dispatches to the drafter (EagleProposer here; also
draft-model, Medusa, n-gram on GPU, suffix, DFlash, Gemma4 proposers upstream). Its dummy runs
go to the drafter's dummy_run, not to these methods."""
import random
import sys
import time

import _faults
from _groundtruth import ids, truth
from _vllm_shared import sample, target_forward
from _workload import stage_work
from vllm._compat.torch_shim import inference_mode
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.sample.rejection_sampler import RejectionSampler
from vllm.v1.spec_decode.eagle import EagleProposer
from vllm.v1.worker.gpu.input_batch import InputBatch
from vllm.v1.worker.gpu.sample.sampler import Sampler


class GPUModelRunner:
    def __init__(self, vllm_config, device=None):
        k = vllm_config.speculative_config.num_speculative_tokens
        self.sampler = Sampler(vllm_config.sampled_per_step)
        self.rejection_sampler = RejectionSampler(self.sampler, k, vllm_config.accept_p, vllm_config.seed)
        self.drafter = EagleProposer(k, vllm_config.seed)
        self.work_rng = random.Random(vllm_config.seed * 7919 + 1)
        self.execute_model_state = None
        self.last_sampled = {}
        self._draft_token_ids = None

    @inference_mode()
    def execute_model(self, scheduler_output, intermediate_tensors=None):
        nst = scheduler_output.num_scheduled_tokens
        _faults.verify_entered(lambda: stage_work(len(nst), 4000))
        if _faults.want_hold("GPUModelRunner.execute_model"):
            _faults.hold(sys._getframe(), "GPUModelRunner.execute_model", scheduler_output.step, "frame")
        input_batch = InputBatch(req_ids=list(nst), num_scheduled_tokens=list(nst.values()),
                                 draft_tokens=dict(scheduler_output.scheduled_spec_decode_tokens),
                                 step=scheduler_output.step)
        h = target_forward(self.work_rng, input_batch)
        self.execute_model_state = (input_batch, h, h >> 3, scheduler_output)
        return None

    @inference_mode()
    def sample_tokens(self, grammar_output=None):
        (input_batch, logits, hidden_states, scheduler_output), self.execute_model_state = \
            self.execute_model_state, None
        sampler_output = sample(self, input_batch, logits, None)

        def propose_draft_token_ids(sampled_token_ids):
            t0 = time.time_ns()
            self._draft_token_ids = self.propose_draft_token_ids(
                scheduler_output, sampled_token_ids, None, hidden_states,
                hidden_states, None, None, None, None)
            t1 = time.time_ns()
            truth().stage("draft", t0, t1, ids(input_batch.req_ids), input_batch.step,
                          method="GPUModelRunner.propose_draft_token_ids")

        propose_draft_token_ids(sampler_output.sampled_token_ids)
        return ModelRunnerOutput(
            req_ids=list(input_batch.req_ids),
            req_id_to_index={r: i for i, r in enumerate(input_batch.req_ids)},
            sampled_token_ids=sampler_output.sampled_token_ids,
        )

    def propose_draft_token_ids(self, scheduler_output, sampled_token_ids, sampling_metadata,
                                hidden_states, sample_hidden_states, aux_hidden_states,
                                spec_decode_metadata, common_attn_metadata, slot_mappings):
        req_ids = list(scheduler_output.num_scheduled_tokens)
        drafts = self.drafter.propose(None, hidden_states, [self.last_sampled[r] for r in req_ids])
        return (req_ids, drafts)

    def _dummy_run(self, num_tokens, **kwargs):
        stage_work(num_tokens, 500)
        self.drafter.dummy_run(num_tokens)
        return None, None

    def take_draft_token_ids(self):
        out, self._draft_token_ids = self._draft_token_ids, None
        return out
