"""Mirrors vllm/v1/worker/gpu/spec_decode/__init__.py (vllm-project/vllm 02abe7013453, main's
newest stored copy: docs/upstream.md): init_speculator picks the speculator by method and imports
its module only then: DFlash (LiLiCorr or DFlash2 by the draft's architecture), DSpark, Gemma4
MTP, multi-module MTP, MTP (NgramMTP with ngram_lookup), EAGLE, a standalone draft model
(StandaloneAR), n-gram on the GPU (NgramGPU); extract_hidden_states is left out here."""


def init_speculator(vllm_config, device, req_states):
    cfg = vllm_config.speculative_config
    if cfg.method == "dflash":
        if "LiLiCorrDraftModel" in cfg.draft_model_config.architectures:
            from vllm.v1.worker.gpu.spec_decode.lilicorr.speculator import LiLiCorrSpeculator
            return LiLiCorrSpeculator(vllm_config, device)
        if "DFlash2DraftModel" in cfg.draft_model_config.architectures:
            from vllm.v1.worker.gpu.spec_decode.dflash2.speculator import DFlash2Speculator
            return DFlash2Speculator(vllm_config, device)
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
        if cfg.ngram_lookup:
            from vllm.v1.worker.gpu.spec_decode.mtp.speculator import NgramMTPSpeculator
            return NgramMTPSpeculator(vllm_config, device, req_states)
        from vllm.v1.worker.gpu.spec_decode.mtp.speculator import MTPSpeculator
        return MTPSpeculator(vllm_config, device)
    if cfg.use_eagle():
        from vllm.v1.worker.gpu.spec_decode.eagle.speculator import EagleSpeculator
        return EagleSpeculator(vllm_config, device)
    if cfg.uses_draft_model():
        from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator
        return StandaloneARSpeculator(vllm_config, device)
    if cfg.use_ngram():
        from vllm.v1.worker.gpu.spec_decode.ngram.speculator import NgramGPUSpeculator
        return NgramGPUSpeculator(vllm_config, device, req_states)
    raise NotImplementedError("%s is not supported yet." % cfg.method)
