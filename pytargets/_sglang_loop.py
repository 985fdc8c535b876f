"""The scheduler loop shared by both SGLang shapes (pytargets): request arrivals, continuous
batching, event_loop_overlap (step N+1 launched before step N's results are processed, so its
accept counts resolve a loop late) and event_loop_normal. Each shape's
sglang/srt/managers/scheduler.py subclasses it with its own batch building and run_batch (the
call into the worker, whose signature changed between the shapes)."""
import collections
import random
import time
import uuid

from _workload import stage_work, unrelated_calls


def make_rid(rng):
    """A uuid4 hex rid (as SGLang's default), drawn from the seeded RNG for reproducibility."""
    return uuid.UUID(int=rng.getrandbits(128), version=4).hex


class SchedulerLoop:
    def __init__(self, server_args, model_worker, num_requests, should_stop, on_iteration,
                 processor_cls, batch_cls, req_cls, sampling_params_cls):
        self.server_args = server_args
        self.model_worker = model_worker
        self.enable_overlap = not server_args.disable_overlap_schedule
        self.should_stop = should_stop
        self.on_iteration = on_iteration
        self.stats = {"finished": 0}
        self.batch_result_processor = processor_cls(
            is_generation=True,
            enable_overlap=self.enable_overlap,
            server_args=server_args,
            model_worker=model_worker,
            stats=self.stats,
        )
        rng = random.Random(server_args.random_seed)
        self.arrivals = collections.deque()
        tick = 0
        for _ in range(num_requests):
            tick += rng.choice((0, 0, 1, 2, 3, 5))
            prompt = [rng.randrange(32000) for _ in range(rng.randint(4, 24))]
            max_new = rng.randint(server_args.max_new_tokens // 2, server_args.max_new_tokens)
            self.arrivals.append((tick, req_cls(make_rid(rng), prompt, sampling_params_cls(max_new))))
        self.waiting_queue = []
        self.running_batch = batch_cls(reqs=[], enable_overlap=self.enable_overlap)
        self.last_batch = None
        self.cur_batch = None
        self.result_queue = collections.deque()
        self.forward_ct = 0
        self.tick = 0

    def recv_requests(self):
        out = []
        while self.arrivals and self.arrivals[0][0] <= self.tick:
            out.append(self.arrivals.popleft()[1])
        self.tick += 1
        return out

    def process_input_requests(self, recv_reqs):
        self.waiting_queue.extend(recv_reqs)

    def get_next_batch_to_run(self):
        if self.last_batch is not None and self.last_batch.forward_mode.is_extend():
            # The last prefill batch joins the running (decode) batch.
            self.running_batch.merge_batch(self.last_batch)
        self.running_batch.filter_batch()
        new_batch = self.get_new_batch_prefill()
        if new_batch is not None:
            return new_batch
        if not self.running_batch.is_empty():
            self.running_batch = self.update_running_batch(self.running_batch)
            return None if self.running_batch.is_empty() else self.running_batch
        return None

    def update_running_batch(self, batch):
        batch.filter_batch()
        batch.prepare_for_decode()
        return batch

    def process_batch_result(self, batch, result):
        if batch.forward_mode.is_decode():
            self.batch_result_processor.process_batch_result_decode(batch, result)
        elif batch.forward_mode.is_extend():
            self.batch_result_processor.process_batch_result_prefill(batch, result)

    def all_done(self):
        return (not self.arrivals and not self.waiting_queue and self.last_batch is None
                and all(r.finished() for r in self.running_batch.reqs))

    def self_check_during_idle(self):
        time.sleep(0.0005)   # nothing to run yet: the next requests have not arrived

    def event_loop_overlap(self):
        """A scheduler loop that overlaps CPU processing and (here: simulated) GPU compute."""
        self.result_queue = collections.deque()
        while not self.should_stop():
            if self.on_iteration is not None:
                self.on_iteration(self)
            self.process_input_requests(self.recv_requests())
            batch = self.get_next_batch_to_run()
            self.cur_batch = batch
            if batch is not None:
                batch_result = self.run_batch(batch)
                self.result_queue.append((batch.copy(), batch_result))
            if self.last_batch is not None:
                # The previous step's results, resolved only now: after this step's launch.
                tmp_batch, tmp_result = self.result_queue.popleft()
                self.process_batch_result(tmp_batch, tmp_result)
            elif batch is None:
                if self.all_done():
                    break
                self.self_check_during_idle()
            self.last_batch = batch
        # Stopping (or done): finish what was launched.
        while self.result_queue:
            tmp_batch, tmp_result = self.result_queue.popleft()
            self.process_batch_result(tmp_batch, tmp_result)
        self.last_batch = None

    def event_loop_normal(self):
        """A normal scheduler loop: results are processed right after each step."""
        while not self.should_stop():
            if self.on_iteration is not None:
                self.on_iteration(self)
            self.process_input_requests(self.recv_requests())
            batch = self.get_next_batch_to_run()
            self.cur_batch = batch
            if batch is not None:
                result = self.run_batch(batch)
                self.process_batch_result(batch.copy(), result)
            elif self.all_done():
                break
            else:
                self.self_check_during_idle()
            self.last_batch = batch
        self.last_batch = None


class ResultProcessorBase:
    """Result processing both shapes' SchedulerBatchResultProcessor (a frozen, slotted
    dataclass) share: prefill results, finish checks and the streaming stand-in."""
    __slots__ = ()

    def process_batch_result_prefill(self, batch, result):
        # One token per new request (from the target prefill).
        for i, req in enumerate(batch.reqs):
            req.output_ids.append(result.next_token_ids[i])
            self._check_finished(req)
        self.stream_output(batch.reqs)

    def _check_finished(self, req):
        was = req.finished()
        req.check_finished()
        if req.finished() and not was:
            self.stats["finished"] += 1

    def stream_output(self, reqs):
        # Detokenizer/streaming bookkeeping stand-in: many small unrelated Python calls.
        unrelated_calls(self.server_args.noise_calls)


class ReqBase:
    """One request. rid is a uuid4 hex string, as SGLang assigns by default."""

    def __init__(self, rid, origin_input_ids, sampling_params):
        self.rid = rid
        self.origin_input_ids = origin_input_ids
        self.output_ids = []
        self.sampling_params = sampling_params
        self.finished_reason = None
        self.is_retracted = False
        self.seq_state = int(rid[:8], 16)   # stand-in for KV/hidden state: stages mix it

    def finished(self):
        return self.finished_reason is not None

    def check_finished(self):
        if self.finished_reason is None and len(self.output_ids) >= self.sampling_params.max_new_tokens:
            self.finished_reason = "length"

    def __repr__(self):
        return "Req(rid=%s)" % self.rid


class BatchOps:
    """What both shapes' ScheduleBatch (a dataclass with a .reqs list) do with their requests."""

    def batch_size(self):
        return len(self.reqs)

    def is_empty(self):
        return len(self.reqs) == 0

    def filter_batch(self, keep_indices=None):
        if keep_indices is None:
            keep_indices = [i for i, r in enumerate(self.reqs) if not r.finished()]
        self.reqs = [self.reqs[i] for i in keep_indices]

    def merge_batch(self, other):
        self.reqs = self.reqs + [r for r in other.reqs if not r.finished()]


def sample_accept_lens(rng, bs, num_steps, accept_p):
    """Per request: each draft survives with probability accept_p until the first rejection.
    Accept lengths include the bonus token (1..num_steps+1)."""
    out = []
    for _ in range(bs):
        n = 0
        while n < num_steps and rng.random() < accept_p:
            n += 1
        out.append(n + 1)
    return out


def accept_drafts(rng, accept_p, num_steps, predict, drafts, stride, draft_stride=None):
    """What a verify decides ("on the GPU"): sampled accept lengths, with each request's
    accepted drafts written over the target's tokens in predict (stride per request)."""
    draft_stride = draft_stride or stride
    accept_lens = sample_accept_lens(rng, len(predict) // stride, num_steps, accept_p)
    for i, a in enumerate(accept_lens):
        for j in range(a - 1):
            predict[i * stride + j] = drafts[i * draft_stride + j]
    return accept_lens


def target_forward(worker, reqs, is_verify):
    """The target model's forward over a batch ("GPU" work): its hidden state and next tokens
    (K + 1 per request for a verify, one otherwise)."""
    bs = len(reqs)
    if is_verify:
        per_req = worker.server_args.speculative_num_draft_tokens
        iters = int((2000 + 800 * bs) * worker.work_rng.uniform(0.8, 1.25))
    else:
        per_req = 1
        iters = int((1000 + 800 * bs) * worker.work_rng.uniform(0.8, 1.25))
    h = 0
    for r in reqs:
        h ^= r.seq_state
    h = stage_work(h, iters, blocks=2 + bs)
    return h, [(h >> (i % 24)) % 32000 + i for i in range(bs * per_req)]
