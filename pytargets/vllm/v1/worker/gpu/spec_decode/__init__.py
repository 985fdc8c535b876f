"""Mirrors vllm/v1/worker/gpu/spec_decode/__init__.py (vllm-project/vllm 01af92e17540, a stored copy not shown to be main's newest: docs/upstream.md):
init_speculator picks the speculator by method and imports its module only then (DFlash,
DSpark, Gemma4 MTP, multi-module MTP, MTP, EAGLE; extract_hidden_states is left out here). No
n-gram speculator is chosen here at that commit."""


def init_speculator(vllm_config, device):
    cfg = vllm_config.speculative_config
    if cfg.method == "dflash":
        from vllm.v1.worker.gpu.spec_decode.dflash.speculator import DFlashSpeculator
        return DFlashSpeculator(vllm_config, device)
    if cfg.method == "dspark":
        from vllm.v1.worker.gpu.spec_decode.dspark.speculator import DSparkSpeculator
        return DSparkSpeculator(vllm_config, device)
    if cfg.use_gemma4_mtp():
        from vllm.v1.worker.gpu.spec_decode.gemma4.speculator import Gemma4Speculator
        return Gemma4Speculator(vllm_config, device)
    if cfg.use_multi_module_mtp():
        from vllm.v1.worker.gpu.spec_decode.multi_module_mtp.speculator import MultiModuleMTPSpeculator
        return MultiModuleMTPSpeculator(vllm_config, device)
    if cfg.method == "mtp":
        from vllm.v1.worker.gpu.spec_decode.mtp.speculator import MTPSpeculator
        return MTPSpeculator(vllm_config, device)
    if cfg.use_eagle():
        from vllm.v1.worker.gpu.spec_decode.eagle.speculator import EagleSpeculator
        return EagleSpeculator(vllm_config, device)
    raise NotImplementedError("%s is not supported yet." % cfg.method)
