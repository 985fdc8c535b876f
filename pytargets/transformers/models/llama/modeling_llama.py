"""Mirrors src/transformers/models/llama/modeling_llama.py: LlamaForCausalLM(LlamaPreTrainedModel,
GenerationMixin), whose forward nn.Module.__call__ runs. The target and the assistant are often
both of this class (a small Llama assisting a large one): the assistant's forward runs the same
code object inside the draft."""
from _workload import stage_work
from transformers.generation.utils import GenerationMixin


class CausalLMOutputWithPast:
    def __init__(self, logits):
        self.logits = logits


class LlamaForCausalLM(GenerationMixin):
    def __init__(self, name, work, vocab, miss_every):
        # miss_every: this model predicts another token than the target after one prefix in
        # that many (0: never), so an assistant's drafts are accepted up to its first miss.
        self.name, self.work, self.vocab, self.miss_every = name, work, vocab, miss_every

    def __call__(self, *args, **kwargs):  # nn.Module.__call__ -> _call_impl -> forward
        return self.forward(*args, **kwargs)

    def forward(self, input_ids=None, **kwargs):
        # One logit row per position: the token this model predicts after each prefix.
        h = stage_work(len(input_ids), self.work, blocks=1)
        logits = [self.next_token(input_ids[: i + 1], h) for i in range(len(input_ids))]
        return CausalLMOutputWithPast(logits)

    def next_token(self, prefix, h):
        x = (sum(prefix) * 2654435761 + len(prefix) * 40503) & 0xFFFFFFFF
        miss = self.miss_every and (x >> 8) % self.miss_every == 0
        return (x + miss) % self.vocab
