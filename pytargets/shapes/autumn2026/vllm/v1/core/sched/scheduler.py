"""Mirrors vllm/v1/core/sched/scheduler.py: Scheduler.schedule() and
Scheduler.update_from_output(), where the per-request accepted count of a verify is
num_accepted = len(generated_token_ids) - 1 (for requests that had draft tokens scheduled)."""
from _groundtruth import ids, truth
from _workload import unrelated_calls
from _vllm_loop import SchedulerBase
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.request import RequestStatus


class Scheduler(SchedulerBase):
    def _output(self, num_scheduled_tokens, spec, new_ids, finished, step):
        return SchedulerOutput(
            req_ids=[r.request_id for r in self.running],
            num_scheduled_tokens=num_scheduled_tokens,
            scheduled_spec_decode_tokens=spec,
            scheduled_new_req_ids=new_ids,
            finished_req_ids=finished,
            step=step,
        )
    def update_from_output(self, scheduler_output, model_runner_output):
        sampled_token_ids = model_runner_output.sampled_token_ids
        acc_rids, acc_counts = [], []
        stopped = []
        for req in self.running:
            req_id = req.request_id
            req_index = model_runner_output.req_id_to_index.get(req_id)
            if req_index is None:
                continue
            generated_token_ids = sampled_token_ids[req_index]
            scheduled_spec_token_ids = scheduler_output.scheduled_spec_decode_tokens.get(req_id)
            if scheduled_spec_token_ids:
                num_draft_tokens = len(scheduled_spec_token_ids)
                num_accepted = len(generated_token_ids) - 1
                num_rejected = num_draft_tokens - num_accepted
                req.num_computed_tokens -= num_rejected
                self.spec_decoding_stats.observe_draft(num_draft_tokens, num_accepted)
                req.num_spec_verifies += 1
                req.num_accepted_drafts += num_accepted
                acc_rids.append(req)
                acc_counts.append(num_accepted)
            req.num_computed_tokens += scheduler_output.num_scheduled_tokens[req_id]
            req.spec_token_ids = []
            for tok in generated_token_ids:
                req.output_token_ids.append(tok)
                if len(req.output_token_ids) >= req.max_tokens:
                    req.status = RequestStatus.FINISHED_LENGTH_CAPPED
                    break
            if req.is_finished():
                stopped.append(req)
        if acc_rids:
            truth().accept(scheduler_output.step, ids([r.request_id for r in acc_rids]), acc_counts)
        for req in stopped:
            self.running.remove(req)
            self.finished_req_ids.add(req.request_id)
            self.num_finished += 1
        # Output processing stand-in (detokenize, stream): many small unrelated Python calls.
        unrelated_calls(self.noise_calls)
        return stopped

