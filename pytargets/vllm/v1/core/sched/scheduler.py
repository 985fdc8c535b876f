"""Mirrors vllm/v1/core/sched/scheduler.py (vllm-project/vllm b4622cf9, a stored copy not shown to be main's newest: docs/upstream.md): Scheduler.schedule() and
Scheduler.update_from_output(self, scheduler_output, model_runner_output), which runs in the
EngineCore process only. For a request with draft tokens scheduled, the accepted count is
num_accepted = max(len(generated_token_ids) - num_sampled_tokens_per_step, 0) (as read in
stored upstream versions; num_sampled_tokens_per_step is 1 for a plain LLM)."""
from _groundtruth import ids, truth
from _workload import unrelated_calls
from _vllm_loop import SchedulerBase
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.request import RequestStatus


class Scheduler(SchedulerBase):
    def __init__(self, max_num_seqs, num_spec_tokens, noise_calls, num_sampled_tokens_per_step=1):
        super().__init__(max_num_seqs, num_spec_tokens, noise_calls)
        self.num_sampled_tokens_per_step = num_sampled_tokens_per_step

    def _output(self, num_scheduled_tokens, spec, new_ids, finished, step):
        return SchedulerOutput(num_scheduled_tokens=num_scheduled_tokens,
                               scheduled_spec_decode_tokens=spec, scheduled_new_req_ids=new_ids,
                               finished_req_ids=finished,
                               total_num_scheduled_tokens=sum(num_scheduled_tokens.values()),
                               step=step)
    def update_from_output(self, scheduler_output, model_runner_output):
        sampled_token_ids = model_runner_output.sampled_token_ids
        accepted = {}
        stopped = []
        for req_id, num_tokens_scheduled in scheduler_output.num_scheduled_tokens.items():
            req = self.requests.get(req_id)
            if req is None or req.is_finished():
                continue
            req_index = model_runner_output.req_id_to_index[req_id]
            generated_token_ids = sampled_token_ids[req_index] if sampled_token_ids else []
            scheduled_spec_token_ids = scheduler_output.scheduled_spec_decode_tokens.get(req_id)
            if scheduled_spec_token_ids and (generated_token_ids or self.num_sampled_tokens_per_step == 0):
                num_draft_tokens = len(scheduled_spec_token_ids)
                num_sampled = self.num_sampled_tokens_per_step
                num_accepted = max(len(generated_token_ids) - num_sampled, 0)
                num_rejected = num_draft_tokens - num_accepted
                if req.num_computed_tokens > 0:
                    req.num_computed_tokens -= num_rejected
                self.spec_decoding_stats.observe_draft(num_draft_tokens, num_accepted)
                accepted[req_id] = num_accepted
            req.num_computed_tokens += num_tokens_scheduled
            req.spec_token_ids = []
            for tok in generated_token_ids:
                req.output_token_ids.append(tok)
                if len(req.output_token_ids) >= req.max_tokens:
                    req.status = RequestStatus.FINISHED_LENGTH_CAPPED
                    break
            if req.is_finished():
                stopped.append(req)
        if accepted:
            # Logged in the runner's batch order (model_runner_output.req_ids), the order of
            # the lists specprobe reads.
            order = [r for r in model_runner_output.req_ids if r in accepted]
            truth().accept(scheduler_output.step, ids(order), [accepted[r] for r in order])
        for req in stopped:
            self.running.remove(req)
            self.finished_req_ids.add(req.request_id)
            self.num_finished += 1
        # Output processing stand-in (detokenize, stream): many small unrelated Python calls.
        unrelated_calls(self.noise_calls)
        return stopped
