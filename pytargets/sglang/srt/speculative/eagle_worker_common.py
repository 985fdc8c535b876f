"""Mirrors python/sglang/srt/speculative/eagle_worker_common.py (sgl-project/sglang
02a3cd954bab, the HYBRID branch (#37237) copy; main's newest is 13a7ffeceaf3, not mirrored yet: docs/upstream.md): the verify body and input builders shared by the EAGLE V2, multi-layer EAGLE and
UNO workers (run_eagle_verify(batch, *, target_worker, ...), build_eagle_verify_input,
prepare_for_draft, prepare_for_draft_extend). Acceptance here: each draft survives with the
test's accept probability until the first rejection (its own seeded stream)."""
from _sglang_loop import accept_drafts
from _workload import stage_work
from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from sglang.srt.speculative.eagle_info import EagleDraftInput, EagleVerifyInput


def prepare_for_draft(draft_input, req_to_token_pool, batch, cuda_graph_runner, draft_runner,
                      topk, num_steps):
    """The draft's ForwardBatch (no requests in it) and whether a CUDA graph can run it."""
    seq = 0
    for r in batch.reqs:
        seq ^= r.seq_state
    return ForwardBatch(ForwardMode.DECODE, len(batch.reqs), seq, draft_input), False


def prepare_for_draft_extend(draft_extend_input, batch, next_token_ids, num_draft_tokens,
                             draft_runner, cuda_graph_runner, **kw):
    return ForwardBatch(ForwardMode.DRAFT_EXTEND_V2, len(batch.reqs), sum(next_token_ids[:8]),
                        draft_extend_input)


def draft_tokens_for(batch, work_rng, num_steps, num_draft_tokens, base_iters, shift=3):
    """Chain drafting (topk=1) for every request: slot 0 is the verified token, then K drafts."""
    tokens = []
    for r in batch.reqs:
        h = stage_work(r.seq_state, int((base_iters + 150 * num_steps) * work_rng.uniform(0.8, 1.25)),
                       blocks=1)
        r.seq_state = h
        tokens.extend((h >> (shift * j)) % 32000 for j in range(num_draft_tokens))
    return tokens


def build_eagle_verify_input(batch, draft_input, parent_list, top_scores_index, draft_tokens,
                             draft_probs, *, target_worker, topk, num_steps, num_draft_tokens,
                             tree_mask_mode=None, device=None):
    assert len(draft_tokens) == len(batch.reqs) * num_draft_tokens
    return EagleVerifyInput(draft_token=draft_tokens, spec_steps=num_steps,
                            draft_token_num=num_draft_tokens)


def run_eagle_verify(batch, *, target_worker, req_to_token_pool=None,
                     token_to_kv_pool_allocator=None, plan_stream=None, plan_stream_ctx=None,
                     topk=1, num_draft_tokens, device=None, metadata_ready_pre_pad=False,
                     finalize_tree_path=True, grammar_barrier=None, rng, num_steps, accept_p):
    """Target-verify forward, sampling, acceptance. The accept lengths stay "on the device"
    (in the result) until the scheduler resolves them. rng/num_steps/accept_p: test-only."""
    verify_input = batch.spec_info
    forward_batch = ForwardBatch(ForwardMode.TARGET_VERIFY, len(batch.reqs), 0, verify_input)
    forward_out = target_worker.forward_batch_generation(
        batch=None, forward_batch=forward_batch, is_verify=True, skip_attn_backend_init=True,
        reqs=batch.reqs)
    bs = len(batch.reqs)
    predict = list(forward_out.next_token_ids)
    # The accepted prefix is the drafted tokens; the bonus token comes from the target.
    accept_lens = accept_drafts(rng, accept_p, num_steps, predict, verify_input.draft_token,
                                num_draft_tokens)
    bonus = [predict[i * num_draft_tokens + accept_lens[i] - 1] for i in range(bs)]
    new_seq_lens = [s + a for s, a in zip(batch.seq_lens, accept_lens)]
    return GenerationBatchResult(
        logits_output=forward_out.logits_output,
        next_token_ids=predict,
        accept_lens=accept_lens,
        next_draft_input=EagleDraftInput(bonus_tokens=bonus, new_seq_lens=new_seq_lens),
        new_seq_lens=new_seq_lens,
        speculative_num_draft_tokens=num_draft_tokens,
        forward_ct=batch.forward_ct,
    )


def spec_v2_forward(worker, batch, on_publish=None, grammar_barrier=None, pp_proxy_tensors=None):
    """The spec-v2 step of the EAGLE-family workers (upstream writes it out in each worker's
    forward_batch_generation): prefill -> target + _draft_extend_for_prefill; decode ->
    draft -> verify -> _draft_extend_for_decode. Ground truth: each stage call is timed
    here, around it, and named by the method a probe sees (the defining class's)."""
    import _faults
    from _groundtruth import truth
    from sglang.srt.managers.utils import prefill_result
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
    from sglang.srt.speculative.spec_utils import log_verify, spec_stage_span
    import time

    T = truth()
    dw = worker.draft_worker
    prefix = getattr(worker, "spec_stage_span_prefix", "")
    if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
        if getattr(worker.server_args, "enable_dp_spec_prefill_coordination", False):
            idle_draft(worker, batch)
        batch_output = worker.target_worker.forward_batch_generation(
            batch, pp_proxy_tensors=pp_proxy_tensors, capture_hidden_mode=CaptureHiddenMode.FULL)
        if on_publish is not None:
            on_publish(batch.seq_lens)
        with spec_stage_span(prefix + "_draft_extend_prefill"):
            t0 = time.time_ns()
            nd = dw._draft_extend_for_prefill(batch, batch_output.logits_output.hidden_states,
                                              batch_output.next_token_ids)
            t1 = time.time_ns()
        T.stage("draft_extend", t0, t1, batch.reqs, batch.forward_ct, mode="prefill",
                method=_method(dw, "_draft_extend_for_prefill"))
        return prefill_result(batch_output, batch, nd)
    worker.activate_step_by_batch(len(batch.reqs))
    if batch.spec_info is None:
        batch.spec_info = EagleDraftInput()
    pending, worker._tail_verify_input = getattr(worker, "_tail_verify_input", None), None
    if pending is not None and pending[0] == [r.rid for r in batch.reqs]:
        # PP: the previous step's tail draft drafted this round; do not re-draft. (Upstream's
        # scheduler relays each request's chain; here a batch whose requests changed since
        # the tail draft is drafted afresh.)
        verify_input = pending[1]
    else:
        with spec_stage_span(prefix + "_draft"):
            t0 = time.time_ns()
            verify_input = dw.draft(batch)
            t1 = time.time_ns()
        T.stage("draft", t0, t1, batch.reqs, batch.forward_ct, method=_method(dw, "draft"))
    assert verify_input.is_verify_input()
    batch.spec_info = verify_input
    vmethod = _method(worker, "verify")
    with spec_stage_span(prefix + "_verify"):
        t0 = time.time_ns()
        try:
            batch_output = worker.verify(batch, pp_proxy_tensors=pp_proxy_tensors,
                                         grammar_barrier=grammar_barrier)
        except _faults.VerifyFailed as e:
            t1 = time.time_ns()
            log_verify(worker, t0, t1, batch, vmethod, error=type(e).__name__)
            del e
            t0 = time.time_ns()
            batch_output = worker.verify(batch, pp_proxy_tensors=pp_proxy_tensors,
                                         grammar_barrier=grammar_barrier)
        t1 = time.time_ns()
    log_verify(worker, t0, t1, batch, vmethod)
    if on_publish is not None:
        on_publish(batch_output.new_seq_lens)
    extend_decode(worker, batch, batch_output, prefix + "_draft_extend_decode")
    if getattr(worker.server_args, "pp_size", 1) > 1 and not batch.forward_mode.is_idle():
        # PP tail draft (13a7ffeceaf3): the next round's chain, drafted now, on the batch as
        # this step leaves it; the next step verifies it without drafting.
        batch.spec_info = batch_output.next_draft_input
        with spec_stage_span(prefix + "_draft"):
            t0 = time.time_ns()
            tail, _, _ = dw.draft(batch, with_topology=True)
            t1 = time.time_ns()
        worker._tail_verify_input = ([r.rid for r in batch.reqs], tail)
        T.stage("draft", t0, t1, batch.reqs, batch.forward_ct + 1, method=_method(dw, "draft"), tail=True)
    return batch_output


def idle_draft(worker, batch):
    """_forward_dp_spec_prefill_coordination's draft of an empty idle batch in a prefill step
    (13a7ffeceaf3): it serves no request, and the ground truth logs it with none."""
    import copy
    import time
    from _groundtruth import truth
    from sglang.srt.speculative.spec_utils import spec_stage_span

    idle = copy.copy(batch)
    idle.reqs = []
    idle.spec_info = EagleDraftInput()
    with spec_stage_span(getattr(worker, "spec_stage_span_prefix", "") + "_draft"):
        t0 = time.time_ns()
        worker.draft_worker.draft(idle)
        t1 = time.time_ns()
    truth().stage("draft", t0, t1, [], batch.forward_ct, method=_method(worker.draft_worker, "draft"), idle=True)


def extend_decode(worker, batch, batch_output, span, **extra):
    """_draft_extend_for_decode, timed (after a verify, or HYBRID's sync after a retrieval one)."""
    from _groundtruth import truth
    from sglang.srt.speculative.spec_utils import spec_stage_span
    import time
    dw = worker.draft_worker
    with spec_stage_span(span):
        t0 = time.time_ns()
        dw._draft_extend_for_decode(batch, batch_output)
        t1 = time.time_ns()
    truth().stage("draft_extend", t0, t1, batch.reqs, batch.forward_ct, mode="decode",
                  method=_method(dw, "_draft_extend_for_decode"), **extra)


def _method(obj, name):
    """The qualified name of the function obj.name resolves to (its code's qualname)."""
    f = getattr(type(obj), name)
    f = getattr(f, "__wrapped__", f)
    return f.__qualname__
