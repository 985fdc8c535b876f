"""Mirrors src/transformers/generation/candidate_generator.py (huggingface/transformers
00a11b6a0745b442473aef0221e098d022b8158c): AssistedCandidateGenerator.get_candidates drafts by
calling the assistant model's own generate() (_generate_candidates), and
update_candidate_strategy adapts num_assistant_tokens from num_matches (the "heuristic"
schedule)."""


class CandidateGenerator:
    def get_candidates(self, input_ids, **kwargs):
        raise NotImplementedError

    def update_candidate_strategy(self, input_ids, scores, num_matches):
        raise NotImplementedError


class AssistedCandidateGenerator(CandidateGenerator):
    def __init__(self, input_ids, assistant_model, generation_config, model_kwargs):
        self.assistant_model = assistant_model
        self.num_assistant_tokens = assistant_model.generation_config.num_assistant_tokens
        self.main_model_max_length = generation_config.max_length
        self.assistant_kwargs = dict(model_kwargs)

    def get_candidates(self, input_ids, **kwargs):
        min_new_tokens, max_new_tokens = self._calculate_new_tokens(input_ids)
        if max_new_tokens == 0:
            return input_ids, None
        generation_args = {"input_ids": input_ids, "min_new_tokens": min_new_tokens, "max_new_tokens": max_new_tokens}
        return self._generate_candidates(generation_args)

    def update_candidate_strategy(self, input_ids, scores, num_matches):
        # len(scores[0]) - 1 candidates: all matched, draft two more next time; else one fewer.
        if num_matches == len(scores[0]) - 1:
            self.num_assistant_tokens += 2
        else:
            self.num_assistant_tokens = max(1, self.num_assistant_tokens - 1)

    def _calculate_new_tokens(self, input_ids):
        new_cur_len = len(input_ids)
        max_new_tokens = min(int(self.num_assistant_tokens), self.main_model_max_length - new_cur_len - 1)
        return 0, max(max_new_tokens, 0)

    def _generate_candidates(self, generation_args):
        assistant_output = self.assistant_model.generate(**generation_args, **self.assistant_kwargs)
        return assistant_output.sequences, assistant_output.scores
