"""Mirrors python/sglang/srt/server_args.py (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md): only the fields
the speculative path here reads. Upstream workers read most of them through
runtime_context.get_spec(); here they stay on ServerArgs."""
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    speculative_algorithm: str = "EAGLE"
    speculative_num_steps: int = 4          # K: drafted tokens per request per step (chain, topk=1)
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 5   # K + 1 (the bonus slot)
    speculative_hybrid_config: str = ""     # HYBRID: JSON naming the retrieval and neural workers
    enable_multi_layer_eagle: bool = False  # EAGLE + this: MultiLayerEagleWorkerV2
    speculative_accept_p: float = 0.7       # test-only: per-draft acceptance probability
    max_running_requests: int = 4
    max_new_tokens: int = 24
    disable_overlap_schedule: bool = False
    random_seed: int = 1
    noise_calls: int = 20000                # test-only: unrelated Python calls per step
    num_draft_layers: int = 2               # multi-layer EAGLE only
    pp_size: int = 1                        # > 1: the last PP stage drafts the next round at the end of a step
    # SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION: a prefill step drafts an empty idle batch first
    enable_dp_spec_prefill_coordination: bool = False
