"""Mirrors python/sglang/srt/speculative/ngram_info.py (sgl-project/sglang, no commit pinned: docs/upstream.md): NgramVerifyInput (the drafted n-gram
tree, and after a verify the accepted tokens relayed to the next step)."""


class NgramVerifyInput:
    def __init__(self, draft_token=None, draft_token_num=1, accept_tokens=None,
                 accept_lens=None, new_seq_lens=None, **kw):
        self.draft_token = draft_token
        self.draft_token_num = draft_token_num
        self.accept_tokens = accept_tokens
        self.accept_lens = accept_lens
        self.new_seq_lens = new_seq_lens
