"""Mirrors python/sglang/srt/speculative/eagle_info.py (sgl-project/sglang, no commit pinned: docs/upstream.md): EagleDraftInput (what a draft step
starts from), EagleDraftExtendInput and EagleVerifyInput (the drafted tree to verify)."""


class EagleDraftInput:
    def __init__(self, bonus_tokens=None, hidden_states=None, new_seq_lens=None, **kw):
        self.bonus_tokens = bonus_tokens
        self.hidden_states = hidden_states
        self.new_seq_lens = new_seq_lens
        self.topk_p = kw.get("topk_p")
        self.topk_index = kw.get("topk_index")


class EagleDraftExtendInput:
    def __init__(self, hidden_states=None, num_tokens_per_req=1, **kw):
        self.hidden_states = hidden_states
        self.num_tokens_per_req = num_tokens_per_req


class EagleVerifyInput:
    def __init__(self, draft_token, spec_steps, draft_token_num, **kw):
        self.draft_token = draft_token            # flat: bs * draft_token_num
        self.spec_steps = spec_steps
        self.draft_token_num = draft_token_num

    def is_verify_input(self):
        return True
