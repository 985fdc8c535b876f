"""torch.inference_mode stand-in, shared by both shapes (see pytargets/_torch_shim.py)."""
from _torch_shim import inference_mode  # noqa: F401
