"""Mirrors vllm/v1/engine/core.py (vllm-project/vllm ac3cb2e2, a stored copy not shown to be main's newest: docs/upstream.md): EngineCore.step() = schedule -> execute_model ->
sample_tokens -> update_from_output -> update_draft_token_ids.

Single process, single thread here. Upstream, EngineCore is its own process (VLLM::EngineCore,
VLLM::EngineCore_DP<r> with DP); with one GPU the runner runs in it, with TP > 1 in the worker
processes (VLLM::Worker_TP<r>), reached through the executor, while update_from_output stays
in EngineCore; with async scheduling step N+1 can be launched before update_from_output of N.
dummy_every: every N steps the runner also makes a dummy run, as a data-parallel rank with no
requests does to keep its peers in step."""
import time

from _groundtruth import ids, truth
from _vllm_loop import Arrivals
from vllm.v1.core.sched.scheduler import Scheduler


class EngineCore(Arrivals):
    def __init__(self, model_runner, num_requests, max_num_seqs, num_spec_tokens, max_tokens,
                 seed, noise_calls, dummy_every=0, order=None, log_verify=True, sampled_per_step=1):
        self.scheduler = Scheduler(max_num_seqs, num_spec_tokens, noise_calls, sampled_per_step)
        self.model_runner = model_runner
        self.dummy_every = dummy_every
        self.order = order   # test-only: the runner's batch order, for the ground truth
        self.log_verify = log_verify   # test-only: False when the runner runs in other processes
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
        nst = scheduler_output.num_scheduled_tokens
        req_ids = self.order(scheduler_output) if self.order else list(nst)
        if self.log_verify:
            T.stage("verify", t0, t1, ids(req_ids), self.step_ct,
                    method=type(self.model_runner).__name__ + ".execute_model",
                    num_spec_reqs=len(scheduler_output.scheduled_spec_decode_tokens),
                    new_rids=list(scheduler_output.scheduled_new_req_ids))
        model_runner_output = self.model_runner.sample_tokens(None)
        self.scheduler.update_from_output(scheduler_output, model_runner_output)
        self.scheduler.update_draft_token_ids(self.model_runner.take_draft_token_ids())
        if self.dummy_every and self.step_ct % self.dummy_every == 0:
            t0 = time.time_ns()
            self.model_runner._dummy_run(8)
            T.event("dummy_run", start_ns=t0, end_ns=time.time_ns(), step=self.step_ct)
        return True

