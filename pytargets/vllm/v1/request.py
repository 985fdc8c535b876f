"""Mirrors vllm/v1/request.py (subset)."""
import enum


class RequestStatus(enum.IntEnum):
    WAITING = 1
    RUNNING = 2
    FINISHED_LENGTH_CAPPED = 3


class Request:
    def __init__(self, request_id, prompt_token_ids, max_tokens):
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.max_tokens = max_tokens
        self.output_token_ids = []
        self.spec_token_ids = []
        self.num_computed_tokens = 0
        self.status = RequestStatus.WAITING
        # test-only totals, for the summary
        self.num_spec_verifies = 0
        self.num_accepted_drafts = 0

    @property
    def num_tokens(self):
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def is_finished(self):
        return self.status == RequestStatus.FINISHED_LENGTH_CAPPED
