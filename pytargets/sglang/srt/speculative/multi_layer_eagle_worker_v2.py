"""Mirrors python/sglang/srt/speculative/multi_layer_eagle_worker_v2.py (sgl-project/sglang
003c5589f7d3, a stored copy not shown to be main's newest: docs/upstream.md): MultiLayerEagleWorkerV2(BaseSpecWorker), not an EAGLEWorkerV2 (its
forward_batch_generation and verify(self, batch, grammar_barrier=None) are its own code
objects; verify calls eagle_worker_common.run_eagle_verify), and
MultiLayerEagleDraftWorker(EagleDraftWorkerBase) with EAGLE's stage method names. The module
imports eagle_worker_common, not eagle_worker_v2: a multi-layer server never loads the EAGLE V2
module."""
import random
import sys

import _faults
from _workload import stage_work
from sglang.srt.speculative import eagle_worker_common
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker, EagleDraftWorkerBase
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.eagle_worker_common import build_eagle_verify_input, spec_v2_forward
from sglang.srt.speculative.spec_utils import draft_tp_context


class MultiLayerEagleDraftWorker(EagleDraftWorkerBase):
    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self.target_worker = target_worker
        self.num_layers = server_args.num_draft_layers
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self.work_rng = random.Random(server_args.random_seed * 130363 + 5)
        self.draft_tp_context = draft_tp_context

    def draft(self, batch):
        tokens = []
        for r in batch.reqs:
            h = r.seq_state
            for layer in range(self.num_layers):   # one MTP layer per draft position group
                h = stage_work(h + layer, int((250 + 120 * self.speculative_num_steps)
                                              * self.work_rng.uniform(0.8, 1.25)), blocks=1)
            r.seq_state = h
            tokens.extend((h >> j) % 32000 for j in range(self.speculative_num_draft_tokens))
        return build_eagle_verify_input(
            batch, batch.spec_info, None, None, tokens, None, target_worker=self.target_worker,
            topk=self.topk, num_steps=self.speculative_num_steps,
            num_draft_tokens=self.speculative_num_draft_tokens)

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids):
        h = target_hidden_states or 1
        for layer in range(self.num_layers):
            h = stage_work(h + layer, int(300 * len(batch.reqs) * self.work_rng.uniform(0.8, 1.25)))
        return EagleDraftInput(hidden_states=h, bonus_tokens=list(next_token_ids),
                               new_seq_lens=list(batch.seq_lens))

    def _draft_extend_for_decode(self, batch, batch_result):
        h = batch_result.logits_output.hidden_states or 1
        for layer in range(self.num_layers):
            h = stage_work(h + layer, int(200 * len(batch.reqs) * self.work_rng.uniform(0.8, 1.25)))
        batch_result.next_draft_input.hidden_states = h


class MultiLayerEagleWorkerV2(BaseSpecWorker):
    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self._target_worker = target_worker
        self._draft_worker = MultiLayerEagleDraftWorker(server_args, gpu_id, nccl_port,
                                                        target_worker)
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        return spec_v2_forward(self, batch, on_publish, grammar_barrier, pp_proxy_tensors)

    def verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None):
        bs = len(batch.reqs)  # the fault hook's closure takes bs: batch stays a plain local, as upstream
        _faults.verify_entered(lambda: stage_work(bs, 5000))
        if _faults.want_hold("MultiLayerEagleWorkerV2.verify"):
            _faults.hold(sys._getframe(), "MultiLayerEagleWorkerV2.verify", batch.forward_ct, "frame")
        return eagle_worker_common.run_eagle_verify(
            batch, target_worker=self.target_worker, topk=self.topk,
            num_draft_tokens=self.speculative_num_draft_tokens, finalize_tree_path=False,
            grammar_barrier=grammar_barrier, rng=self.accept_rng,
            num_steps=self.speculative_num_steps, accept_p=self.server_args.speculative_accept_p)
