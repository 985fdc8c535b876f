"""Assisted generation as a transformers user runs it: model.generate(input_ids,
assistant_model=assistant, max_new_tokens=M), one prompt after another, on the stand-in
package transformers/ (its header names the upstream files and commits).

python3 pytargets/run_transformers.py [--requests N=20] [--max-new-tokens M=24] [--draft-len K=4]
    [--log FILE] [--wait-signal] (the common flags of _entry.py; the others are ignored)

Ground truth (one JSON line each): every draft (get_candidates) and every verify (the target's
forward in _assisted_decoding) with "request": the generate() call's number, from 1, and the
verify's num_correct_drafts (n_matches, which upstream is a GPU tensor specprobe cannot read).
"""
import argparse
import sys

import _entry


def main():
    p = argparse.ArgumentParser()
    _entry.add_common_args(p)
    args = p.parse_args()
    _entry.setup_path(args.shape)
    from transformers.generation.utils import GenerationConfig
    from transformers.models.llama.modeling_llama import LlamaForCausalLM

    target = LlamaForCausalLM("target", 1500, 32000, 0)
    assistant = LlamaForCausalLM("assistant", 300, 32000, 3)  # same class: its forward runs inside the draft
    assistant.generation_config = GenerationConfig(None, num_assistant_tokens=args.draft_len)
    stopper, log = _entry.start(args, "run_transformers", "transformers-assisted")
    done = 0
    for k in range(1, args.requests + 1):
        if stopper():
            break
        log.request = k
        prompt = [(k * 7919 + i) % 32000 for i in range(8)]
        config = GenerationConfig(args.max_new_tokens, num_assistant_tokens=args.draft_len)
        target.generate(prompt, generation_config=config, assistant_model=assistant)
        done += 1
    _entry.finish(log, "run_transformers", {"requests": done})


if __name__ == "__main__":
    sys.exit(main())
