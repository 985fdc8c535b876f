"""Mirrors vllm/config (subset) (vllm-project/vllm, no commit pinned: docs/upstream.md): the speculative method and token count the runner reads, plus
the test's acceptance probability and seed."""
import dataclasses


@dataclasses.dataclass
class SpeculativeConfig:
    method: str = "eagle"
    num_speculative_tokens: int = 4

    def use_eagle(self):
        return self.method in ("eagle", "eagle3")

    def use_gemma4_mtp(self):
        return self.method == "gemma4_mtp"

    def use_multi_module_mtp(self):
        return self.method == "multi_module_mtp"


@dataclasses.dataclass
class VllmConfig:
    speculative_config: SpeculativeConfig
    max_num_seqs: int = 4
    accept_p: float = 0.7      # test-only
    seed: int = 1              # test-only
    # test-only: tokens a step samples besides the accepted drafts (upstream: the runner's
    # model_state.num_new_sampled_tokens_per_step, the scheduler's num_sampled_tokens_per_step)
    sampled_per_step: int = 1
