"""Mirrors sglang/srt/speculative/eagle_worker_common.py: run_eagle_verify, the verify body
shared by the single-layer and multi-layer EAGLE V2 workers."""
from _sglang_loop import sample_accept_lens  # noqa: F401  (used by ngram_worker too)
from sglang.srt.managers.scheduler import GenerationBatchResult


class EagleDraftInput:
    def __init__(self, verified_id=None, hidden_states=None, new_seq_lens=None):
        self.verified_id = verified_id
        self.hidden_states = hidden_states
        self.new_seq_lens = new_seq_lens
        self.topk_p = None
        self.topk_index = None


class EagleVerifyInput:
    def __init__(self, draft_token, spec_steps, draft_token_num):
        self.draft_token = draft_token            # flat: bs * draft_token_num
        self.spec_steps = spec_steps
        self.draft_token_num = draft_token_num

    def is_verify_input(self):
        return True


def run_eagle_verify(batch, *, target_worker, rng, topk, num_steps, num_draft_tokens, accept_p):
    """Shared verify step: target-verify forward, sampling, acceptance bookkeeping. The accept
    lengths stay "on the device" (in the result) until the scheduler resolves them."""
    verify_input = batch.spec_info
    forward_out = target_worker.forward_batch_generation(
        model_worker_batch=None, forward_batch=batch, is_verify=True, skip_attn_backend_init=True)
    bs = len(batch.reqs)
    accept_lens = sample_accept_lens(rng, bs, num_steps, accept_p)
    predict = list(forward_out.next_token_ids)
    drafts = verify_input.draft_token if verify_input is not None else predict
    for i in range(bs):
        # The accepted prefix is the drafted tokens; the bonus token comes from the target.
        base = i * num_draft_tokens
        for j in range(accept_lens[i] - 1):
            predict[base + j] = drafts[base + j]
    verified_id = [predict[i * num_draft_tokens + accept_lens[i] - 1] for i in range(bs)]
    next_draft_input = EagleDraftInput(
        verified_id=verified_id,
        new_seq_lens=[s + a for s, a in zip(batch.seq_lens, accept_lens)],
    )
    return GenerationBatchResult(
        logits_output=forward_out.logits_output,
        next_token_ids=predict,
        accept_lens=accept_lens,
        next_draft_input=next_draft_input,
        speculative_num_draft_tokens=num_draft_tokens,
        forward_ct=batch.forward_ct,
    )
