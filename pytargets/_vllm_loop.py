"""The engine loop pieces shared by both vLLM shapes (pytargets): request arrivals, scheduling
(running requests with their drafts first, then new prefills), spec-decode stats and draft
token bookkeeping. Each shape's scheduler.py and engine/core.py subclass these with what changed
(update_from_output, the runner's construction and call)."""
import random
import uuid

from vllm.v1.request import Request, RequestStatus


class SpecDecodingStats:
    def __init__(self):
        self.num_drafts = 0
        self.num_draft_tokens = 0
        self.num_accepted_tokens = 0

    def observe_draft(self, num_draft_tokens, num_accepted_tokens):
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens


class SchedulerBase:
    def __init__(self, max_num_seqs, num_spec_tokens, noise_calls):
        self.max_num_running_reqs = max_num_seqs
        self.num_spec_tokens = num_spec_tokens
        self.noise_calls = noise_calls
        self.waiting = []
        self.running = []
        self.requests = {}
        self.finished_req_ids = set()
        self.num_finished = 0
        self.spec_decoding_stats = SpecDecodingStats()

    def add_request(self, request):
        self.waiting.append(request)
        self.requests[request.request_id] = request

    def has_requests(self):
        return bool(self.waiting or self.running)

    def schedule(self, step):
        num_scheduled_tokens, spec = {}, {}
        new_ids = []
        for req in self.running:
            num_scheduled_tokens[req.request_id] = 1 + len(req.spec_token_ids)
            if req.spec_token_ids:
                spec[req.request_id] = list(req.spec_token_ids)
        while self.waiting and len(self.running) < self.max_num_running_reqs:
            req = self.waiting.pop(0)
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            num_scheduled_tokens[req.request_id] = len(req.prompt_token_ids)
            new_ids.append(req.request_id)
        finished, self.finished_req_ids = self.finished_req_ids, set()
        return self._output(num_scheduled_tokens, spec, new_ids, finished, step)

    def update_draft_token_ids(self, draft_token_ids):
        if draft_token_ids is None:
            return
        req_ids, drafts = draft_token_ids
        for rid, toks in zip(req_ids, drafts):
            req = self.requests.get(rid)
            if req is not None and not req.is_finished():
                req.spec_token_ids = list(toks[: self.num_spec_tokens])


class Arrivals:
    """Requests arriving over engine steps (seeded), ids as vLLM's completions API makes them."""

    def make_arrivals(self, num_requests, max_tokens, seed):
        rng = random.Random(seed)
        self.arrivals = []
        tick = 0
        for _ in range(num_requests):
            tick += rng.choice((0, 0, 1, 2, 3, 5))
            rid = "cmpl-%s-0" % uuid.UUID(int=rng.getrandbits(128), version=4).hex
            prompt = [rng.randrange(32000) for _ in range(rng.randint(4, 24))]
            self.arrivals.append((tick, Request(rid, prompt, rng.randint(max_tokens // 2, max_tokens))))
        self.arrivals.reverse()
        self.tick = 0
        self.step_ct = 0

    def add_arrived_requests(self):
        while self.arrivals and self.arrivals[-1][0] <= self.tick:
            self.scheduler.add_request(self.arrivals.pop()[1])
        self.tick += 1

    def done(self):
        return not self.arrivals and not self.scheduler.has_requests()
