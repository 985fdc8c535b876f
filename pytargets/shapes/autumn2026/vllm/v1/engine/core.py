"""Mirrors vllm/v1/engine/core.py: EngineCore.step() = schedule -> execute_model ->
sample_tokens -> update_from_output -> update_draft_token_ids.

Single process, single thread here. In the real engine the model runner runs in a separate
GPU worker process (reached through the executor), and with async scheduling the next step can
be launched before update_from_output of the previous one."""
import time

from _groundtruth import ids, truth
from _vllm_loop import Arrivals
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.worker.gpu.model_runner import GPUModelRunner


class EngineCore(Arrivals):
    def __init__(self, num_requests, max_num_seqs, num_spec_tokens, accept_p, max_tokens,
                 seed, noise_calls):
        self.scheduler = Scheduler(max_num_seqs, num_spec_tokens, noise_calls)
        self.model_runner = GPUModelRunner(num_spec_tokens, accept_p, seed)
        self.make_arrivals(num_requests, max_tokens, seed)

    def step(self):
        self.add_arrived_requests()
        if not self.scheduler.has_requests():
            time.sleep(0.0005)
            return False
        self.step_ct += 1
        scheduler_output = self.scheduler.schedule(self.step_ct)
        T = truth()
        t0 = time.time_ns()
        self.model_runner.execute_model(scheduler_output)
        t1 = time.time_ns()
        rids = ids(scheduler_output.req_ids)
        T.stage("verify", t0, t1, rids, self.step_ct, method="GPUModelRunner.execute_model",
                num_spec_reqs=len(scheduler_output.scheduled_spec_decode_tokens),
                new_rids=list(scheduler_output.scheduled_new_req_ids))
        model_runner_output = self.model_runner.sample_tokens(None)
        self.scheduler.update_from_output(scheduler_output, model_runner_output)
        self.scheduler.update_draft_token_ids(self.model_runner.take_draft_token_ids())
        return True

