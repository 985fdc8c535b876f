"""Mirrors python/sglang/srt/speculative/hybrid_info.py (sgl-project/sglang, no commit pinned: docs/upstream.md): HybridVerifyInput carries both
routes' next-step inputs."""


class HybridVerifyInput:
    def __init__(self, eagle_draft_input, ngram_verify_input):
        self.eagle_draft_input = eagle_draft_input
        self.ngram_verify_input = ngram_verify_input
