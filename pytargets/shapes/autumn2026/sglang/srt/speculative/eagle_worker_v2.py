"""Mirrors sglang/srt/speculative/eagle_worker_v2.py (SGLang's default EAGLE path, spec v2):
EagleDraftWorker (draft, _draft_extend_for_prefill, _draft_extend_for_decode) and EAGLEWorkerV2
(forward_batch_generation runs draft -> verify -> draft extend for a decode batch; verify calls
eagle_worker_common.run_eagle_verify).

Test-only additions: the ground-truth lines written by the caller right around each stage call,
and the fault/caveat hooks (_faults)."""
import random
import sys
import time

import _faults
from _groundtruth import truth
from _workload import stage_work
from sglang.srt.managers.tp_worker import TpModelWorker  # noqa: F401  (as the real module)
from sglang.srt.speculative import eagle_worker_common
from sglang.srt.speculative.base_spec_worker import BaseDraftWorker, BaseSpecWorker
from sglang.srt.speculative.eagle_worker_common import EagleDraftInput, EagleVerifyInput
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class EagleDraftWorker(BaseDraftWorker):
    def __init__(self, server_args, target_worker, seed):
        self.server_args = server_args
        self.target_worker = target_worker
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self.work_rng = random.Random(seed * 104729 + 3)
        self.init_lm_head()

    def init_lm_head(self):
        self.shares_lm_head = True

    def draft_tp_context(self, _group=None):
        return _NullContext()

    def draft(self, model_worker_batch):
        if _faults.want_hold("EagleDraftWorker.draft"):
            try:
                raise _faults.HeldFrame()
            except _faults.HeldFrame as e:
                _faults.hold(e.__traceback__, "EagleDraftWorker.draft",
                             model_worker_batch.forward_ct, "traceback")
        bs = len(model_worker_batch.reqs)
        draft_tokens = []
        for r in model_worker_batch.reqs:
            h = stage_work(r.seq_state, int((300 + 150 * self.speculative_num_steps)
                                            * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
            # chain drafting (topk=1): slot 0 is the verified token, then K drafts
            draft_tokens.append(h % 32000)
            draft_tokens.extend((h >> (3 * j)) % 32000 for j in range(1, self.speculative_num_draft_tokens))
        assert len(draft_tokens) == bs * self.speculative_num_draft_tokens
        return EagleVerifyInput(draft_token=draft_tokens, spec_steps=self.speculative_num_steps,
                                draft_token_num=self.speculative_num_draft_tokens)

    def draft_forward(self, forward_batch):
        return None

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids):
        h = target_hidden_states
        for r in batch.reqs:
            h = stage_work(h ^ r.seq_state, int(500 * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
        return EagleDraftInput(hidden_states=h, verified_id=list(next_token_ids),
                               new_seq_lens=list(batch.seq_lens))

    def _draft_extend_for_decode(self, batch, batch_result):
        h = batch_result.logits_output.hidden_states or 0
        for r, a in zip(batch.reqs, batch_result.accept_lens):
            h = stage_work(h ^ r.seq_state ^ a, int(300 * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
        nd = batch_result.next_draft_input
        nd.topk_p, nd.topk_index, nd.hidden_states = [1.0], [h % 32000], h


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class EAGLEWorkerV2(BaseSpecWorker):
    draft_worker_cls = EagleDraftWorker

    def __init__(self, server_args, target_worker):
        self.server_args = server_args
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self.speculative_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
        self._target_worker = target_worker
        self._draft_worker = self.draft_worker_cls(server_args, target_worker, server_args.random_seed)
        # Acceptance ("what the GPU decides"): its own seeded stream, so the accept counts of a
        # run depend only on --seed and the batch composition, never on timing.
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)

    @property
    def target_worker(self):
        return self._target_worker

    @property
    def draft_worker(self):
        return self._draft_worker

    def clear_cache_pool(self):
        pass

    def forward_batch_generation(self, model_worker_batch):
        T = truth()
        step = model_worker_batch.forward_ct
        if model_worker_batch.forward_mode.is_extend() or model_worker_batch.is_extend_in_batch:
            # Target prefill, then draft prefill (draft extend for the new requests).
            batch_output = self.target_worker.forward_batch_generation(model_worker_batch)
            with self.draft_worker.draft_tp_context():
                t0 = time.time_ns()
                batch_output.next_draft_input = self.draft_worker._draft_extend_for_prefill(
                    model_worker_batch,
                    batch_output.logits_output.hidden_states,
                    batch_output.next_token_ids,
                )
                t1 = time.time_ns()
            T.stage("draft_extend", t0, t1, model_worker_batch.reqs, step, mode="prefill",
                    method="EagleDraftWorker._draft_extend_for_prefill")
            return _prefill_result(batch_output, model_worker_batch)
        with self.draft_worker.draft_tp_context():
            t0 = time.time_ns()
            verify_input = self.draft_worker.draft(model_worker_batch)
            t1 = time.time_ns()
        T.stage("draft", t0, t1, model_worker_batch.reqs, step)
        assert verify_input.is_verify_input()
        model_worker_batch.spec_info = verify_input
        t0 = time.time_ns()
        try:
            batch_output = self.verify(model_worker_batch)
        except _faults.VerifyFailed as e:
            t1 = time.time_ns()
            T.stage("verify", t0, t1, model_worker_batch.reqs, step, error=type(e).__name__)
            del e
            t0 = time.time_ns()
            batch_output = self.verify(model_worker_batch)
        t1 = time.time_ns()
        T.stage("verify", t0, t1, model_worker_batch.reqs, step)
        with self.draft_worker.draft_tp_context():
            t0 = time.time_ns()
            self.draft_worker._draft_extend_for_decode(model_worker_batch, batch_output)
            t1 = time.time_ns()
        T.stage("draft_extend", t0, t1, model_worker_batch.reqs, step, mode="decode")
        return batch_output

    def verify(self, batch):
        _faults.verify_entered(lambda: stage_work(len(batch.reqs), 5000))
        _faults.verify_may_raise(lambda: stage_work(len(batch.reqs), 2500))
        if _faults.want_hold("EAGLEWorkerV2.verify"):
            _faults.hold(sys._getframe(), "EAGLEWorkerV2.verify", batch.forward_ct, "frame")
        verify_input = batch.spec_info
        verify_input.num_tokens_per_req = self.speculative_num_steps + 1
        return eagle_worker_common.run_eagle_verify(
            batch,
            target_worker=self.target_worker,
            rng=self.accept_rng,
            topk=self.topk,
            num_steps=self.speculative_num_steps,
            num_draft_tokens=self.speculative_num_draft_tokens,
            accept_p=self.server_args.speculative_accept_p,
        )


def _prefill_result(batch_output, model_worker_batch):
    from sglang.srt.managers.scheduler import GenerationBatchResult
    return GenerationBatchResult(
        logits_output=batch_output.logits_output,
        next_token_ids=batch_output.next_token_ids,
        accept_lens=None,
        next_draft_input=getattr(batch_output, "next_draft_input", None),
        speculative_num_draft_tokens=1,
        forward_ct=model_worker_batch.forward_ct,
    )
