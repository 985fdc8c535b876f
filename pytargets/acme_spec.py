"""A plugin speculative algorithm, registered the way SGLang's plugin path allows
(SpeculativeAlgorithm.register, sgl-project/sglang 02a3cd954bab spec_info.py): a worker nobody
in the catalog knows. ACMEWorker drafts with propose_block(self, batch) and verifies with
check_block(self, batch); its module lives outside the sglang package. Test target only."""
import random
import time

from _groundtruth import truth
from _sglang_loop import accept_drafts
from _workload import stage_work
from sglang.srt.managers.utils import GenerationBatchResult, prefill_result
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from sglang.srt.speculative.eagle_worker_common import draft_tokens_for
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class ACMEWorker(BaseSpecWorker):
    def __init__(self, server_args, gpu_id, nccl_port, target_worker):
        self.server_args = server_args
        self._target_worker = target_worker
        self._draft_worker = None
        self.n = server_args.speculative_num_draft_tokens
        self.k = server_args.speculative_num_steps
        self.accept_rng = random.Random(server_args.random_seed * 31337 + 11)
        self.work_rng = random.Random(server_args.random_seed * 104729 + 3)

    def propose_block(self, batch):
        return draft_tokens_for(batch, self.work_rng, self.k, self.n, 300)

    def check_block(self, batch):
        out = self.target_worker.forward_batch_generation(batch, is_verify=True)
        predict = list(out.next_token_ids)
        accept_lens = accept_drafts(self.accept_rng, self.server_args.speculative_accept_p,
                                    self.k, predict, batch.spec_info, self.n)
        return GenerationBatchResult(next_token_ids=predict, accept_lens=accept_lens,
                                     new_seq_lens=[s + a for s, a in zip(batch.seq_lens, accept_lens)],
                                     speculative_num_draft_tokens=self.n, forward_ct=batch.forward_ct)

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                 pp_proxy_tensors=None):
        if batch.forward_mode.is_extend():
            return prefill_result(self.target_worker.forward_batch_generation(batch), batch)
        t0 = time.time_ns()
        batch.spec_info = self.propose_block(batch)
        t1 = time.time_ns()
        truth().stage("draft", t0, t1, batch.reqs, batch.forward_ct, method="ACMEWorker.propose_block")
        t0 = time.time_ns()
        result = self.check_block(batch)
        t1 = time.time_ns()
        truth().stage("verify", t0, t1, batch.reqs, batch.forward_ct, method="ACMEWorker.check_block")
        return result


@SpeculativeAlgorithm.register("ACME", supports_overlap=True)
def _factory(server_args):
    return ACMEWorker
