"""Mirrors vllm/config (subset) (vllm-project/vllm, no commit pinned: docs/upstream.md): the speculative method and token count the runner reads, plus
the test's acceptance probability and seed."""
import dataclasses


@dataclasses.dataclass
class DraftModelConfig:
    architectures: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SpeculativeConfig:
    method: str = "eagle"
    num_speculative_tokens: int = 4
    draft_model_config: DraftModelConfig = dataclasses.field(default_factory=DraftModelConfig)
    ngram_lookup: bool = False   # MTP with an n-gram lookup first (NgramMTPSpeculator)

    def uses_draft_model(self):
        return self.method == "draft_model"

    def use_ngram(self):
        return self.method in ("ngram", "ngram_gpu")

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
