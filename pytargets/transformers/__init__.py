"""Stand-in for Hugging Face transformers' assisted generation (model.generate(assistant_model=...)):
the module paths, classes and methods the catalog spec transformers-assisted names, in the call
structure of huggingface/transformers src/transformers/generation/utils.py (commit
000034a44ef887621d9b36001a5eb7c46e64cb3f) and candidate_generator.py (commit
00a11b6a0745b442473aef0221e098d022b8158c). No tensors: token ids are ints, the models'
forward passes are CPU work (_workload). No code is copied."""
