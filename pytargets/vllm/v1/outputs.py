"""Mirrors vllm/v1/outputs.py (subset) (vllm-project/vllm, no commit pinned: docs/upstream.md): ModelRunnerOutput, what a runner hands back to the
scheduler: req_ids and sampled_token_ids index-aligned (accepted drafts + 1 per request)."""


class ModelRunnerOutput:
    def __init__(self, req_ids, req_id_to_index, sampled_token_ids):
        self.req_ids = req_ids
        self.req_id_to_index = req_id_to_index
        self.sampled_token_ids = sampled_token_ids
