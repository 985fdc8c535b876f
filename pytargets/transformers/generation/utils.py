"""Mirrors src/transformers/generation/utils.py (huggingface/transformers
000034a44ef887621d9b36001a5eb7c46e64cb3f): GenerationMixin.generate (decorated with
torch.no_grad(), a functools.wraps wrapper) picks the decoding loop; _assisted_decoding runs, per
step, candidate_generator.get_candidates(input_ids) (the draft), self(**model_inputs) (the
target's forward: the verify), counts n_matches (a GPU tensor upstream: out of specprobe's
reach) and calls update_candidate_strategy; _sample is the assistant's own loop inside the
draft. The ground-truth lines are written around the draft and the verify."""
import time

from _groundtruth import truth
from _torch_shim import inference_mode as no_grad
from transformers.generation.candidate_generator import AssistedCandidateGenerator


class GenerationConfig:
    def __init__(self, max_new_tokens, num_assistant_tokens=20):
        self.max_new_tokens = max_new_tokens
        self.num_assistant_tokens = num_assistant_tokens
        self.max_length = None


class GenerateDecoderOnlyOutput:
    def __init__(self, sequences, scores):
        self.sequences, self.scores = sequences, scores


class GenerationMixin:
    @no_grad()
    def generate(self, input_ids=None, generation_config=None, assistant_model=None, max_new_tokens=None,
                 min_new_tokens=None, **kwargs):
        generation_config = generation_config or GenerationConfig(max_new_tokens)
        if max_new_tokens is not None:
            generation_config.max_new_tokens = max_new_tokens
        generation_config.max_length = len(input_ids) + generation_config.max_new_tokens
        if assistant_model is not None:
            return self._assisted_decoding(input_ids, generation_config, assistant_model, kwargs)
        return self._sample(input_ids, generation_config)

    def _get_candidate_generator(self, generation_config, input_ids, assistant_model, model_kwargs):
        return AssistedCandidateGenerator(input_ids, assistant_model, generation_config, model_kwargs)

    def _sample(self, input_ids, generation_config):
        input_ids, scores = list(input_ids), []
        while len(input_ids) < generation_config.max_length:
            outputs = self(input_ids=input_ids)
            scores.append(outputs.logits[-1])
            input_ids.append(outputs.logits[-1])
        return GenerateDecoderOnlyOutput(input_ids, scores)

    def _assisted_decoding(self, input_ids, generation_config, assistant_model, model_kwargs):
        candidate_generator = self._get_candidate_generator(generation_config, input_ids, assistant_model, model_kwargs)
        log = truth()
        input_ids = list(input_ids)
        while len(input_ids) < generation_config.max_length:
            cur_len = len(input_ids)
            #  1. Fetch candidate sequences from a `CandidateGenerator`
            t0 = time.time_ns()
            candidate_input_ids, candidate_logits = candidate_generator.get_candidates(input_ids)
            t1 = time.time_ns()
            candidate_length = len(candidate_input_ids) - cur_len
            log.stage("draft", t0, t1, [], None, request=log.request, num_drafts=candidate_length)
            # 2. Run a forward pass on the candidate sequence
            t0 = time.time_ns()
            outputs = self(input_ids=candidate_input_ids)
            t1 = time.time_ns()
            new_logits = outputs.logits[-candidate_length - 1:]
            # 3. Select the accepted tokens: the candidates up to the first mismatch
            selected_tokens = new_logits
            candidate_new_tokens = candidate_input_ids[cur_len:]
            n_matches = 0
            while n_matches < candidate_length and candidate_new_tokens[n_matches] == selected_tokens[n_matches]:
                n_matches += 1
            log.stage("verify", t0, t1, [], None, request=log.request, num_correct_drafts=n_matches)
            # 4. Keep the matches and the target's own next token
            input_ids = input_ids + selected_tokens[: n_matches + 1]
            # 5. Update the candidate generation strategy
            candidate_generator.update_candidate_strategy(input_ids, [new_logits], n_matches)
        return GenerateDecoderOnlyOutput(input_ids[: generation_config.max_length], None)
