"""Mirrors python/sglang/srt/speculative/hybrid_controller.py (sgl-project/sglang 02a3cd954bab):
HybridController(BaseSpecWorker) routes each batch to a retrieval worker (NGRAM) or a neural
worker (EAGLE), both created through SpeculativeAlgorithm.create_worker, so a HYBRID server
imports hybrid_controller, ngram_worker and the neural worker's module (eagle_worker_v2).
forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
pp_proxy_tensors=None): for a pure decode batch, probe the corpus
(retrieval_worker.get_retrieval_info), pick the route, run that worker's
forward_batch_generation, then let the other worker catch up (sync_hybrid_state: after a
retrieval verify, EAGLE runs its _draft_extend_for_decode). Upstream routes on match and
continuation lengths; here a seeded coin decides, so runs repeat.

Ground truth: the scheduler times the controller's forward_batch_generation of a decode batch
as the step's "verify" (the frame that covers both routes); the routed worker's own verify is a
"nested_verify" event; its draft and the EAGLE draft extend are stage lines as usual.

Branch-only: hybrid_controller.py exists only on the branch of sgl-project/sglang#37237 (open,
not merged). That branch also gives NGRAMWorker the controller's hooks (get_retrieval_info,
sync_hybrid_state, _hybrid_prepared_drafts, spec_stage_span_prefix, a draft that returns a
bool) and EAGLEWorkerV2 its hooks (spec_stage_span_prefix, sync_hybrid_state), and its workers
take ps: ParallelState. Main's workers have none of these, so ngram_worker.py and
eagle_worker_v2.py here mirror main, and the branch's additions live in BranchNGRAMWorker and
BranchEAGLEWorkerV2 below, used only by this controller (their stage methods are main's, so
the code objects a spec traces are the same)."""
import dataclasses
import json
import random
import time

from _groundtruth import truth
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.speculative import eagle_worker_common
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from sglang.srt.speculative.hybrid_info import HybridVerifyInput
from sglang.srt.speculative.ngram_info import NgramVerifyInput
from sglang.srt.speculative.ngram_worker import NGRAMWorker
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.srt.speculative.spec_utils import spec_stage_span


class BranchNGRAMWorker(NGRAMWorker):
    """NGRAMWorker as the HYBRID branch (02a3cd954bab) has it: the retrieval route's hooks and
    a draft that returns whether it drafted. Its verify is main's, inside the branch's
    spec_stage_span names."""

    def __init__(self, server_args, gpu_id, ps, nccl_port, target_worker,
                 spec_stage_span_prefix=""):
        super().__init__(server_args, gpu_id, nccl_port, target_worker)
        self.spec_stage_span_prefix = spec_stage_span_prefix
        self._hybrid_prepared_drafts = None

    def clear_cache_pool(self):
        super().clear_cache_pool()
        self._hybrid_prepared_drafts = None

    def get_retrieval_info(self, batch):
        """HYBRID's route probe: the lookup the next draft would use (cached for it)."""
        tokens, match_lens = self._prepare_draft_tokens(batch)
        self._hybrid_prepared_drafts = tokens
        return [self.draft_token_num - 1] * len(batch.reqs), match_lens

    def _prepare_for_speculative_decoding(self, batch) -> bool:
        if not batch.forward_mode.is_decode():
            return False
        if self._hybrid_prepared_drafts is not None:
            tokens, self._hybrid_prepared_drafts = self._hybrid_prepared_drafts, None
        else:
            tokens, _ = self._prepare_draft_tokens(batch)
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        batch.spec_info = NgramVerifyInput(draft_token=tokens, draft_token_num=self.draft_token_num)
        return True

    def sync_hybrid_state(self, batch, batch_result):
        """Update the corpus after a neural batch of a HYBRID server."""
        self._update_ngram_corpus(batch)

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        with spec_stage_span(self.spec_stage_span_prefix + "_verify"):
            return super().forward_batch_generation(batch, on_publish, grammar_barrier,
                                                    pp_proxy_tensors)


class BranchEAGLEWorkerV2(EAGLEWorkerV2):
    """EAGLEWorkerV2 as the HYBRID branch (02a3cd954bab) has it: named spans per route and the
    draft extend after a retrieval verify."""

    def __init__(self, server_args, gpu_id, ps, nccl_port, target_worker,
                 spec_stage_span_prefix=""):
        super().__init__(server_args, gpu_id, nccl_port, target_worker)
        self.spec_stage_span_prefix = spec_stage_span_prefix

    def sync_hybrid_state(self, batch, batch_result):
        """Advance EAGLE's draft state after a retrieval (NGRAM) verify of a HYBRID server."""
        batch_result.next_draft_input = EagleDraftInput(bonus_tokens=batch_result.next_token_ids)
        eagle_worker_common.extend_decode(
            self, batch, batch_result, self.spec_stage_span_prefix + "_draft_extend_decode_retrieval",
            route="retrieval")
        return batch_result.next_draft_input


# The branch's classes of the workers main's create_worker returns.
_BRANCH_WORKERS = {NGRAMWorker: BranchNGRAMWorker, EAGLEWorkerV2: BranchEAGLEWorkerV2}


class HybridController(BaseSpecWorker):
    truth_verify_frame = "HybridController.forward_batch_generation"

    def __init__(self, server_args, gpu_id, ps, nccl_port, target_worker):
        self.server_args = server_args
        self._target_worker = target_worker
        config = json.loads(server_args.speculative_hybrid_config or
                            '{"retrieval": {"algorithm": "NGRAM"}, "neural": {"algorithm": "EAGLE"}}')
        self.workers = {}
        for role in ("retrieval", "neural"):
            algo = SpeculativeAlgorithm.from_string(config[role]["algorithm"])
            role_args = dataclasses.replace(server_args, speculative_algorithm=algo.name)
            cls = algo.create_worker(role_args)
            cls = _BRANCH_WORKERS[cls]   # the branch's worker, with the route hooks
            self.workers[role] = cls(server_args=role_args, gpu_id=gpu_id, ps=ps,
                                     nccl_port=nccl_port, target_worker=target_worker,
                                     spec_stage_span_prefix=role)
            self.workers[role].nested = True
        self.retrieval_worker = self.workers["retrieval"]
        self.neural_worker = self.workers["neural"]
        self._last_route = "neural"
        self.route_rng = random.Random(server_args.random_seed * 97 + 5)

    @property
    def draft_worker(self):
        return self.neural_worker.draft_worker

    def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size=0, route=None):
        target_route = route if route is not None else self._last_route
        self.workers[target_route].on_verify_complete_cpu(num_correct_drafts_per_req,
                                                          batch_size=batch_size)
        BaseSpecWorker.on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size)

    def _should_use_retrieval(self, batch, lengths):
        if not batch.forward_mode.is_decode() or batch.is_extend_in_batch:
            return False
        return self.route_rng.random() < 0.5

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        is_pure_decode = batch.forward_mode.is_decode() and not batch.is_extend_in_batch
        hybrid_input = batch.spec_info if isinstance(batch.spec_info, HybridVerifyInput) else None
        if is_pure_decode:
            if hybrid_input is not None:
                batch.spec_info = hybrid_input.ngram_verify_input
            lengths = self.retrieval_worker.get_retrieval_info(batch)
        else:
            lengths = ([], [])
        if self._should_use_retrieval(batch, lengths):
            t0 = time.time_ns()
            result = self.retrieval_worker.forward_batch_generation(
                batch, on_publish=on_publish, grammar_barrier=grammar_barrier,
                pp_proxy_tensors=pp_proxy_tensors)
            t1 = time.time_ns()
            truth().event("nested_verify", start_ns=t0, end_ns=t1, rids=[r.rid for r in batch.reqs],
                          step=batch.forward_ct, method="NGRAMWorker.forward_batch_generation")
            eagle_input = self.neural_worker.sync_hybrid_state(batch, result)
            route = "retrieval"
        else:
            self.retrieval_worker._hybrid_prepared_drafts = None
            if hybrid_input is not None:
                batch.spec_info = hybrid_input.eagle_draft_input
            self.neural_worker.activate_step_by_batch(len(batch.reqs))
            result = self.neural_worker.forward_batch_generation(
                batch, on_publish=on_publish, grammar_barrier=grammar_barrier,
                pp_proxy_tensors=pp_proxy_tensors)
            eagle_input = result.next_draft_input
            self.retrieval_worker.sync_hybrid_state(batch, result)
            route = "neural"
        result.next_draft_input = HybridVerifyInput(eagle_input, result.next_draft_input)
        self._last_route = route
        result.spec_route = route
        return result
