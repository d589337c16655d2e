#!/usr/bin/env python3
"""Anchor benchmark: the OFFICIAL LTX-2 v1.2.0 Python stack (ltx-core / ltx-pipelines) on one GPU.

Measures one denoising forward pass of the full-size LTX-2.3 / LTX-2.5 22B audio-video
transformer (random bf16 weights; no real weights exist here) at the two sizes the distilled
two-stage pipeline runs for a 1536x1024x121 clip:
  stage 1: 768x512   (video latent 16x16x24 = 6144 tokens)
  stage 2: 1536x1024 (video latent 16x32x48 = 24576 tokens)
plus 126 audio tokens (121 frames @ 24 fps at 25 audio latents/s) and the 1024-token text context
the Gemma connectors hand to the transformer.

The model is built by the reference's own configurator (LTXModelConfigurator.from_metadata via
create_meta_model, i.e. on the meta device) from the checkpoint-metadata transformer config,
materialized directly on CUDA in bf16 (to_empty + normal init). Inputs come from the reference's
own helpers (VideoLatentTools / AudioLatentTools / GaussianNoiser / create_noised_state), and the
timed call is the distilled pipeline's own step call: SimpleDenoiser(...)(BatchSplitAdapter(
X0Model(model)), video_state, audio_state, sigmas, step_idx).

Usage (on a CUDA machine with PyTorch):  LTX_REF=/path/to/LTX-2 python3 bench_official.py [--skip ...]
Results are printed and written to $OUT/bench_official.txt (+ .json), or <repo>/out/ when OUT is unset.
Reference source: $LTX_REF, else <repo>/.ref/LTX-2.

Copied into ltx.cpp as tools/bench/bench_official.py from the project's shared tools
(shared/tools/bench_official.py, written for issue 7 to anchor `ltx bench`); the only changes are
this note and the two path defaults: the reference source defaults to <repo>/.ref/LTX-2 and the
results go to <repo>/out/ (both git-ignored) when LTX_REF / OUT are unset.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.abc
import importlib.machinery
import json
import math
import os
import statistics
import sys
import time
import traceback
import types
from unittest import mock

T_START = time.time()

# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.environ.get("OUT") or os.path.join(REPO_ROOT, "out")
os.makedirs(OUT_DIR, exist_ok=True)
TXT_PATH = os.path.join(OUT_DIR, "bench_official.txt")
JSON_PATH = os.path.join(OUT_DIR, "bench_official.json")
_txt = open(TXT_PATH, "w")
RESULTS: dict = {"sections": {}}


def log(*args: object) -> None:
    s = " ".join(str(a) for a in args)
    print(s, flush=True)
    _txt.write(s + "\n")
    _txt.flush()


def save_json() -> None:
    with open(JSON_PATH, "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)


def elapsed() -> float:
    return time.time() - T_START


# --------------------------------------------------------------------------------------------
# Stubs for optional media packages the reference imports at module level (PyAV etc.).
# Only packages that fail to import are stubbed; attention/kernel packages are never stubbed
# (the reference probes them to choose the attention backend).
# --------------------------------------------------------------------------------------------
class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str):  # noqa: ANN204
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        m = mock.MagicMock(name=f"{self.__name__}.{attr}")
        setattr(self, attr, m)
        return m


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    roots: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        m = _StubModule(spec.name)
        m.__path__ = []
        m.__file__ = f"<stub {spec.name}>"
        return m

    def exec_module(self, module) -> None:  # noqa: ANN001
        return None


STUBBED: list[str] = []


def install_stubs() -> None:
    finder = _StubFinder()
    for root in ("av", "torchaudio", "OpenImageIO", "cv2", "PIL", "tqdm", "cloudpickle"):
        try:
            importlib.import_module(root)
        except Exception as e:  # noqa: BLE001  (missing or ABI-broken)
            for k in [k for k in sys.modules if k == root or k.startswith(root + ".")]:
                del sys.modules[k]
            finder.roots.add(root)
            STUBBED.append(f"{root} ({type(e).__name__})")
    if finder.roots:
        sys.meta_path.insert(0, finder)


REF = os.environ.get("LTX_REF") or os.path.join(REPO_ROOT, ".ref", "LTX-2")
sys.path.insert(0, os.path.join(REF, "packages", "ltx-pipelines", "src"))
sys.path.insert(0, os.path.join(REF, "packages", "ltx-core", "src"))
install_stubs()

import torch  # noqa: E402

# --------------------------------------------------------------------------------------------
# Configurations (checkpoint metadata "config" -> "transformer"), as the 22B checkpoints set them.
# LTX-2.3: Lightricks/LTX-2.3 ltx-2.3-22b-{dev,distilled-1.1}.safetensors metadata.
# LTX-2.5: same architecture + ff_bias=false (video FFN bias-free; audio_ff_bias absent -> true)
#          + use_keyframes_abs_pos_embedding=true.
# --------------------------------------------------------------------------------------------
LTX23_TRANSFORMER = {
    "_class_name": "AVTransformer3DModel",
    "activation_fn": "gelu-approximate",
    "attention_bias": True,
    "attention_head_dim": 128,
    "attention_type": "default",
    "caption_channels": 3840,
    "cross_attention_dim": 4096,
    "double_self_attention": False,
    "dropout": 0.0,
    "in_channels": 128,
    "norm_elementwise_affine": False,
    "norm_eps": 1e-06,
    "norm_num_groups": 32,
    "num_attention_heads": 32,
    "num_embeds_ada_norm": 1000,
    "num_layers": 48,
    "num_vector_embeds": None,
    "only_cross_attention": False,
    "cross_attention_norm": True,
    "out_channels": 128,
    "upcast_attention": False,
    "use_linear_projection": False,
    "qk_norm": "rms_norm",
    "standardization_norm": "rms_norm",
    "positional_embedding_type": "rope",
    "positional_embedding_theta": 10000.0,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "timestep_scale_multiplier": 1000,
    "av_ca_timestep_scale_multiplier": 1000.0,
    "causal_temporal_positioning": True,
    "audio_num_attention_heads": 32,
    "audio_attention_head_dim": 64,
    "use_audio_video_cross_attention": True,
    "share_ff": False,
    "audio_out_channels": 128,
    "audio_cross_attention_dim": 2048,
    "audio_positional_embedding_max_pos": [20],
    "av_cross_ada_norm": True,
    "use_embeddings_connector": True,
    "connector_attention_head_dim": 128,
    "connector_num_attention_heads": 32,
    "connector_num_layers": 8,
    "connector_positional_embedding_max_pos": [4096],
    "connector_num_learnable_registers": 128,
    "connector_norm_output": True,
    "use_middle_indices_grid": True,
    "apply_gated_attention": True,
    "connector_apply_gated_attention": True,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "caption_proj_input_norm": False,
    "connector_learnable_registers_std": 1,
    "caption_proj_before_connector": True,
    "audio_connector_attention_head_dim": 64,
    "audio_connector_num_attention_heads": 32,
    "cross_attention_adaln": True,
    "rope_type": "split",
    "frequencies_precision": "float64",
    "text_encoder_norm_type": "PER_TOKEN_RMS",
}
LTX25_TRANSFORMER = dict(LTX23_TRANSFORMER, ff_bias=False, use_keyframes_abs_pos_embedding=True)

# LTX-2.3 conv video VAE ("vae" section of the LTX-2.3 checkpoint metadata).
LTX23_VAE = {
    "_class_name": "CausalVideoAutoencoder",
    "dims": 3,
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 128,
    "encoder_blocks": [
        ["res_x", {"num_layers": 4}],
        ["compress_space_res", {"multiplier": 2}],
        ["res_x", {"num_layers": 6}],
        ["compress_time_res", {"multiplier": 2}],
        ["res_x", {"num_layers": 4}],
        ["compress_all_res", {"multiplier": 2}],
        ["res_x", {"num_layers": 2}],
        ["compress_all_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 2}],
    ],
    "decoder_blocks": [
        ["res_x", {"num_layers": 4}],
        ["compress_space", {"multiplier": 2}],
        ["res_x", {"num_layers": 6}],
        ["compress_time", {"multiplier": 2}],
        ["res_x", {"num_layers": 4}],
        ["compress_all", {"multiplier": 1}],
        ["res_x", {"num_layers": 2}],
        ["compress_all", {"multiplier": 2}],
        ["res_x", {"num_layers": 2}],
    ],
    "scaling_factor": 1.0,
    "norm_layer": "pixel_norm",
    "patch_size": 4,
    "latent_log_var": "uniform",
    "use_quant_conv": False,
    "causal_decoder": False,
    "timestep_conditioning": False,
    "normalize_latent_channels": False,
    "encoder_base_channels": 128,
    "decoder_base_channels": 128,
    "spatial_padding_mode": "zeros",
}

TEXT_TOKENS = 1024  # TOKENIZER_MAX_LENGTH; connectors replace padding by registers -> all 1024 reach the DiT
FRAMES, FPS = 121, 24.0
SIZES = [("stage1 768x512", 768, 512), ("stage2 1536x1024", 1536, 1024)]
DTYPE = torch.bfloat16
DEV = torch.device("cuda")


def fmt_gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def free_cuda() -> None:
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def time_cuda(fn, warmup: int = 2, iters: int = 5) -> list[float]:  # noqa: ANN001
    """ms per call, CUDA events around each call (includes any host gaps inside the call)."""
    for _ in range(warmup):
        out = fn()
        del out
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        out = fn()
        e.record()
        e.synchronize()
        del out
        times.append(s.elapsed_time(e))
    return times


def stats(times: list[float]) -> dict:
    return {
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "max_ms": max(times),
        "all_ms": [round(t, 2) for t in times],
    }


# --------------------------------------------------------------------------------------------
# Analytic FLOPs of one LTXModel forward (B=1). Linear: 2*in*out per token it is applied to.
# Attention: 4*Nq*Nk*(heads*d_head) (QK^T + PV), softmax/RoPE/norms not counted.
# --------------------------------------------------------------------------------------------
def analytic_flops(cfg: dict, nv: int, na: int, nt: int) -> dict:
    L = cfg["num_layers"]
    D = cfg["num_attention_heads"] * cfg["attention_head_dim"]  # 4096
    Da = cfg["audio_num_attention_heads"] * cfg["audio_attention_head_dim"]  # 2048
    H, Ha = cfg["num_attention_heads"], cfg["audio_num_attention_heads"]
    C = cfg["cross_attention_dim"]  # video text context dim 4096
    Ca = cfg["audio_cross_attention_dim"]  # audio text context dim 2048
    cin, cout = cfg["in_channels"], cfg["out_channels"]
    g = 1 if cfg.get("apply_gated_attention") else 0
    k_ada = 9 if cfg.get("cross_attention_adaln") else 6
    prompt_ada = cfg.get("cross_attention_adaln") and cfg.get("use_prompt_adaln_single", True)

    def emb(dim: int, coef: int, ntok: int) -> int:  # AdaLayerNormSingle: 256->dim->dim, then dim->coef*dim
        return 2 * ntok * (256 * dim + dim * dim + dim * coef * dim)

    pre = 2 * nv * cin * D + 2 * na * cin * Da
    pre += emb(D, k_ada, nv) + emb(Da, k_ada, na)  # per-token timestep AdaLN (timesteps are per token)
    if prompt_ada:
        pre += emb(D, 2, 1) + emb(Da, 2, 1)  # prompt AdaLN on sigma
    pre += emb(D, 4, nv) + emb(Da, 4, na)  # A/V cross scale-shift AdaLN, per token
    pre += emb(D, 1, 1) + emb(Da, 1, 1)  # A/V cross gate AdaLN on the other modality's sigma
    post = 2 * nv * D * cout + 2 * na * Da * cout

    blk_lin = 0
    # video self-attention (q,k,v,out + gate logits)
    blk_lin += 2 * nv * (4 * D * D + g * D * H)
    # video text cross-attention: q,out,gate on video tokens; k,v on text tokens
    blk_lin += 2 * nv * (2 * D * D + g * D * H) + 2 * nt * (2 * C * D)
    # video FFN (4x, GELU-tanh)
    blk_lin += 2 * nv * (2 * D * 4 * D)
    # audio self, text cross, FFN
    blk_lin += 2 * na * (4 * Da * Da + g * Da * Ha)
    blk_lin += 2 * na * (2 * Da * Da + g * Da * Ha) + 2 * nt * (2 * Ca * Da)
    blk_lin += 2 * na * (2 * Da * 4 * Da)
    # audio->video (Q video 4096->2048, K/V audio 2048->2048, out 2048->4096, gate on video)
    blk_lin += 2 * nv * (D * Da + Da * D + g * D * Ha) + 2 * na * (2 * Da * Da)
    # video->audio (Q audio 2048->2048, K/V video 4096->2048, out 2048->2048, gate on audio)
    blk_lin += 2 * na * (Da * Da + Da * Da + g * Da * Ha) + 2 * nv * (2 * D * Da)

    blk_attn = 4 * nv * nv * D + 4 * nv * nt * D  # video self + text cross
    blk_attn += 4 * na * na * Da + 4 * na * nt * Da  # audio self + text cross
    blk_attn += 4 * nv * na * Da + 4 * na * nv * Da  # a2v + v2a (inner dim 2048)

    linear = pre + post + L * blk_lin
    attn = L * blk_attn
    return {
        "linear_flops": linear,
        "attention_flops": attn,
        "total_flops": linear + attn,
        "video_self_attn_flops": L * 4 * nv * nv * D,
        "per_token_adaln_flops": emb(D, k_ada, nv) + emb(Da, k_ada, na) + emb(D, 4, nv) + emb(Da, 4, na),
    }


# --------------------------------------------------------------------------------------------
# Reference imports
# --------------------------------------------------------------------------------------------
def import_reference() -> dict:
    ns: dict = {}
    from ltx_core.batch_split import BatchSplitAdapter
    from ltx_core.components.noisers import GaussianNoiser
    from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
    from ltx_core.loader.helpers import create_meta_model
    from ltx_core.model.transformer.attention import (
        Attention,
        _torch_default_sdpa_priority,
        attention_label,
        automatic_attention,
        automatic_masked_attention,
    )
    from ltx_core.model.transformer.model import LTXModel, X0Model
    from ltx_core.model.transformer.model_configurator import LTXModelConfigurator
    from ltx_core.tools import AudioLatentTools, VideoLatentTools
    from ltx_core.types import VIDEO_SCALE_FACTORS, AudioLatentShape, VideoLatentShape, VideoPixelShape

    ns.update({k: v for k, v in locals().items() if k != "ns"})
    ns["pipelines_import"] = "ltx_pipelines (official SimpleDenoiser / create_noised_state / constants)"
    try:
        from ltx_pipelines.utils.constants import DISTILLED_SIGMAS, STAGE_2_DISTILLED_SIGMAS
        from ltx_pipelines.utils.denoisers import SimpleDenoiser
        from ltx_pipelines.utils.helpers import _CONV_AUTO_FRAMES, _CONV_AUTO_LONG_SIDE, create_noised_state

        ns.update(
            SimpleDenoiser=SimpleDenoiser,
            create_noised_state=create_noised_state,
            DISTILLED_SIGMAS=DISTILLED_SIGMAS,
            STAGE_2_DISTILLED_SIGMAS=STAGE_2_DISTILLED_SIGMAS,
            CONV_AUTO_LONG_SIDE=_CONV_AUTO_LONG_SIDE,
            CONV_AUTO_FRAMES=_CONV_AUTO_FRAMES,
        )
    except Exception:  # noqa: BLE001
        log("WARNING: ltx_pipelines import failed; using verbatim local copies of the 3 helpers:")
        log(traceback.format_exc())
        ns["pipelines_import"] = "FALLBACK local copies (ltx_pipelines import failed)"
        from ltx_core.model.transformer import Modality
        from ltx_core.tiling import DimensionSizeConfig

        def timesteps_from_mask(denoise_mask, sigma):  # noqa: ANN001, ANN202
            if isinstance(sigma, torch.Tensor) and sigma.dim() == 1:
                sigma = sigma.view(-1, *([1] * (denoise_mask.dim() - 1)))
            return denoise_mask * sigma

        def modality_from_latent_state(state, context, sigma, enabled=True):  # noqa: ANN001, ANN202
            if state.frozen:
                sigma = torch.zeros_like(sigma)
            return Modality(
                enabled=enabled,
                latent=state.latent,
                sigma=sigma,
                timesteps=timesteps_from_mask(state.denoise_mask, sigma),
                positions=state.positions,
                context=context,
                context_mask=None,
                attention_mask=state.attention_mask,
                keyframes_mask=state.keyframes_mask,
            )

        class SimpleDenoiser:
            def __init__(self, v_context, a_context):  # noqa: ANN001
                self.v_context, self.a_context = v_context, a_context

            def __call__(self, transformer, video_state, audio_state, sigmas, step_index):  # noqa: ANN001, ANN204
                sigma = sigmas[step_index]
                pv = modality_from_latent_state(video_state, self.v_context, sigma.expand(video_state.latent.shape[0]))
                pa = modality_from_latent_state(audio_state, self.a_context, sigma.expand(audio_state.latent.shape[0]))
                return transformer(video=pv, audio=pa, perturbations=None)

        def create_noised_state(tools, conditionings, noiser, dtype, device, noise_scale=1.0, initial_latent=None):  # noqa: ANN001, ANN202
            state = tools.create_initial_state(device, dtype, initial_latent)
            for c in conditionings:
                state = c.apply_to(latent_state=state, latent_tools=tools)
            return noiser(state, noise_scale)

        ns.update(
            SimpleDenoiser=SimpleDenoiser,
            create_noised_state=create_noised_state,
            DISTILLED_SIGMAS=torch.tensor([1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0]),
            STAGE_2_DISTILLED_SIGMAS=torch.tensor([0.909375, 0.725, 0.421875, 0.0]),
            CONV_AUTO_LONG_SIDE=DimensionSizeConfig(tile_size=768, overlap=64),
            CONV_AUTO_FRAMES=DimensionSizeConfig(tile_size=80, overlap=24),
        )
    return ns


# --------------------------------------------------------------------------------------------
# Model construction
# --------------------------------------------------------------------------------------------
@torch.no_grad()
def init_transformer_params(model: torch.nn.Module, seed: int = 0) -> None:
    g = torch.Generator(device=DEV).manual_seed(seed)
    for name, p in model.named_parameters():
        if name.endswith("q_norm.weight") or name.endswith("k_norm.weight"):
            p.fill_(1.0)
        elif p.ndim >= 2:
            p.normal_(0.0, 0.02, generator=g)
        else:
            p.normal_(0.0, 0.01, generator=g)
    for name, b in model.named_buffers():
        b.zero_()


def build_transformer(R: dict, tcfg: dict):  # noqa: ANN201
    metadata = {"config": {"transformer": tcfg}}
    model = R["create_meta_model"](R["LTXModelConfigurator"], metadata)  # meta device, official configurator
    model = model.to(dtype=DTYPE)  # still meta: no memory
    model = model.to_empty(device=DEV)  # allocate bf16 storage directly on the GPU
    init_transformer_params(model)
    x0 = R["X0Model"](model).to(DEV).eval()
    return model, x0


def describe_model(model: torch.nn.Module) -> dict:
    blk = model.transformer_blocks[0]
    n_params = sum(p.numel() for p in model.parameters())
    n_blocks = sum(p.numel() for p in model.transformer_blocks.parameters())
    return {
        "params_total": n_params,
        "params_transformer_blocks": n_blocks,
        "params_per_block": n_blocks // len(model.transformer_blocks),
        "num_layers": len(model.transformer_blocks),
        "model_type": model.model_type.value,
        "inner_dim": model.inner_dim,
        "audio_inner_dim": model.audio_inner_dim,
        "cross_attention_adaln": model.cross_attention_adaln,
        "use_prompt_adaln_single": model.use_prompt_adaln_single,
        "prompt_adaln_single_present": model.prompt_adaln_single is not None,
        "rope_type": model.rope_type.value,
        "double_precision_rope": model.double_precision_rope,
        "use_middle_indices_grid": model.use_middle_indices_grid,
        "timestep_scale_multiplier": model.timestep_scale_multiplier,
        "av_ca_timestep_scale_multiplier": model.av_ca_timestep_scale_multiplier,
        "positional_embedding_max_pos": model.positional_embedding_max_pos,
        "audio_positional_embedding_max_pos": model.audio_positional_embedding_max_pos,
        "caption_projection_in_transformer": hasattr(model, "caption_projection"),
        "gated_attention (to_gate_logits)": blk.attn1.to_gate_logits is not None,
        "video_ff_bias": blk.ff.net[0].proj.bias is not None,
        "audio_ff_bias": blk.audio_ff.net[0].proj.bias is not None,
        "keyframes_abs_pos_embedding": getattr(model, "keyframes_abs_pos_embedding", None) is not None,
        "block_scale_shift_table": tuple(blk.scale_shift_table.shape),
        "attn2.to_k (text K proj)": tuple(blk.attn2.to_k.weight.shape),
        "audio_to_video_attn.to_q": tuple(blk.audio_to_video_attn.to_q.weight.shape),
        "video_to_audio_attn.to_k": tuple(blk.video_to_audio_attn.to_k.weight.shape),
    }


def build_inputs(R: dict, width: int, height: int, sigmas: torch.Tensor, seed: int = 10) -> dict:
    """What DiffusionStage.__call__ builds for one stage (no conditionings, pure noise)."""
    pixel_shape = R["VideoPixelShape"](batch=1, frames=FRAMES, height=height, width=width, fps=FPS)
    v_shape = R["VideoLatentShape"].from_pixel_shape(pixel_shape, scale_factors=R["VIDEO_SCALE_FACTORS"])
    video_tools = R["VideoLatentTools"](
        R["VideoLatentPatchifier"](patch_size=1), v_shape, FPS, scale_factors=R["VIDEO_SCALE_FACTORS"]
    )
    a_shape = R["AudioLatentShape"].from_video_pixel_shape(pixel_shape)
    audio_tools = R["AudioLatentTools"](R["AudioPatchifier"](patch_size=1), a_shape)
    gen = torch.Generator(device=DEV).manual_seed(seed)
    noiser = R["GaussianNoiser"](generator=gen)
    vs = R["create_noised_state"](video_tools, [], noiser, DTYPE, DEV, noise_scale=1.0)
    as_ = R["create_noised_state"](audio_tools, [], noiser, DTYPE, DEV, noise_scale=1.0)
    # Connector outputs are RMS-normalized -> unit-RMS random stand-ins, full 1024 tokens, no mask.
    v_ctx = torch.randn(1, TEXT_TOKENS, 4096, generator=gen, device=DEV, dtype=DTYPE)
    a_ctx = torch.randn(1, TEXT_TOKENS, 2048, generator=gen, device=DEV, dtype=DTYPE)
    return {
        "video_state": vs,
        "audio_state": as_,
        "v_ctx": v_ctx,
        "a_ctx": a_ctx,
        "sigmas": sigmas.to(dtype=torch.float32, device=DEV),
        "v_latent_shape": tuple(v_shape.to_torch_shape()),
        "a_latent_shape": tuple(a_shape.to_torch_shape()),
    }


def describe_inputs(inp: dict, step_idx: int) -> dict:
    vs, as_ = inp["video_state"], inp["audio_state"]
    return {
        "video_latent_5d": inp["v_latent_shape"],
        "video_tokens": tuple(vs.latent.shape),
        "video_positions": tuple(vs.positions.shape),
        "video_denoise_mask(->per-token timesteps)": tuple(vs.denoise_mask.shape),
        "video_keyframes_mask": tuple(vs.keyframes_mask.shape) if vs.keyframes_mask is not None else None,
        "audio_latent_4d": inp["a_latent_shape"],
        "audio_tokens": tuple(as_.latent.shape),
        "audio_positions": tuple(as_.positions.shape),
        "video_context": tuple(inp["v_ctx"].shape),
        "audio_context": tuple(inp["a_ctx"].shape),
        "context_mask": None,
        "sigma": float(inp["sigmas"][step_idx]),
    }


def make_step(R: dict, transformer, inp: dict, step_idx: int):  # noqa: ANN001, ANN201
    denoiser = R["SimpleDenoiser"](inp["v_ctx"], inp["a_ctx"])
    wrapped = R["BatchSplitAdapter"](transformer, max_batch_size=1)  # as DiffusionStage.__call__
    vs, as_, sigmas = inp["video_state"], inp["audio_state"], inp["sigmas"]

    def step():  # noqa: ANN202
        return denoiser(wrapped, vs, as_, sigmas, step_idx)

    return step


# --------------------------------------------------------------------------------------------
# Counting pass (hooks): exact linear FLOPs from module calls + attention FLOPs from q/k shapes
# --------------------------------------------------------------------------------------------
def hook_count_flops(R: dict, model: torch.nn.Module, step) -> dict:  # noqa: ANN001
    counts = {"linear": 0, "attention": 0, "sdpa_calls": 0}
    handles = []

    def lin_hook(mod, inputs, output):  # noqa: ANN001, ANN202
        x = inputs[0]
        rows = x.numel() // mod.in_features
        counts["linear"] += 2 * rows * mod.in_features * mod.out_features

    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            handles.append(m.register_forward_hook(lin_hook))
    patched = []
    for m in model.modules():
        if isinstance(m, R["Attention"]):
            orig = m.attention_function

            def counting(q, k, v, heads, *a, _orig=orig, **kw):  # noqa: ANN001, ANN202
                counts["attention"] += 4 * q.shape[0] * q.shape[1] * k.shape[1] * q.shape[2]
                counts["sdpa_calls"] += 1
                return _orig(q, k, v, heads, *a, **kw)

            m.attention_function = counting
            patched.append((m, orig))
    try:
        out = step()
        torch.cuda.synchronize()
        del out
    finally:
        for h in handles:
            h.remove()
        for m, orig in patched:
            m.attention_function = orig
    counts["total"] = counts["linear"] + counts["attention"]
    return counts


# --------------------------------------------------------------------------------------------
# Profiler breakdown
# --------------------------------------------------------------------------------------------
def classify_kernel(name: str) -> str:
    n = name.lower()
    if any(s in n for s in ("fmha", "flash", "sdpa", "attention", "attn")) or ("cudnn" in n and "fprop" not in n):
        return "attention"
    if any(s in n for s in ("gemm", "xmma", "cutlass", "nvjet", "matmul", "sm90_", "cublas")):
        return "gemm"
    return "other (elementwise/norm/rope/copy)"


def profile_step(step, label: str) -> dict:  # noqa: ANN001
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        out = step()
        torch.cuda.synchronize()
        del out
    per_kernel: dict[str, float] = {}
    for evt in prof.events():
        dt = getattr(evt, "device_type", None)
        if dt is None or "CUDA" not in str(dt):
            continue
        try:
            us = float(evt.time_range.elapsed_us())  # device-side event: kernel start..end
        except Exception:  # noqa: BLE001
            us = float(getattr(evt, "device_time_total", 0.0) or 0.0)
        per_kernel[evt.name] = per_kernel.get(evt.name, 0.0) + us
    total = sum(per_kernel.values()) or 1.0
    cats: dict[str, float] = {}
    for k, v in per_kernel.items():
        c = classify_kernel(k)
        cats[c] = cats.get(c, 0.0) + v
    top = sorted(per_kernel.items(), key=lambda kv: -kv[1])[:22]
    log(f"  [profile {label}] GPU kernel time total {total / 1000:.1f} ms (one step, profiler on)")
    for c, v in sorted(cats.items(), key=lambda kv: -kv[1]):
        log(f"    {c:38s} {v / 1000:9.1f} ms  {100 * v / total:5.1f}%")
    log("    top kernels:")
    for k, v in top:
        log(f"    {v / 1000:9.2f} ms {100 * v / total:5.1f}%  {k[:150]}")
    attn_names = sorted({k for k in per_kernel if classify_kernel(k) == "attention"})
    return {
        "total_ms": total / 1000,
        "categories_ms": {k: v / 1000 for k, v in cats.items()},
        "top_kernels_ms": [(k[:200], v / 1000) for k, v in top],
        "attention_kernel_names": attn_names[:20],
    }


def sdpa_backend_probe() -> dict:
    """Which SDPA backend torch's dispatcher can use for each real attention shape (priority
    CUDNN > FLASH > EFFICIENT > MATH, the order the reference hands to sdpa_kernel)."""
    shapes = {
        "video self  (32h x128, 6144x6144)": (32, 6144, 6144, 128),
        "video self  (32h x128, 24576x24576)": (32, 24576, 24576, 128),
        "video text  (32h x128, N x1024)": (32, 6144, 1024, 128),
        "audio self  (32h x64, 126x126)": (32, 126, 126, 64),
        "a2v         (32h x64, Nv x126)": (32, 6144, 126, 64),
        "v2a         (32h x64, 126 xNv)": (32, 126, 6144, 64),
    }
    res = {}
    for label, (h, nq, nk, d) in shapes.items():
        q = torch.empty(1, h, nq, d, device=DEV, dtype=DTYPE)
        k = torch.empty(1, h, nk, d, device=DEV, dtype=DTYPE)
        v = torch.empty(1, h, nk, d, device=DEV, dtype=DTYPE)
        try:
            params = torch.backends.cuda.SDPAParams(q, k, v, None, 0.0, False, False)
        except TypeError:
            params = torch.backends.cuda.SDPAParams(q, k, v, None, 0.0, False)
        chosen = "MATH"
        for name, fn in (
            ("CUDNN_ATTENTION", torch.backends.cuda.can_use_cudnn_attention),
            ("FLASH_ATTENTION", torch.backends.cuda.can_use_flash_attention),
            ("EFFICIENT_ATTENTION", torch.backends.cuda.can_use_efficient_attention),
        ):
            try:
                if fn(params, False):
                    chosen = name
                    break
            except Exception:  # noqa: BLE001
                continue
        res[label] = chosen
        del q, k, v
    return res


def microbench() -> dict:
    """Calibration: dense bf16 GEMM and raw SDPA throughput on this GPU (same process)."""
    out = {}
    a = torch.randn(8192, 8192, device=DEV, dtype=DTYPE)
    b = torch.randn(8192, 8192, device=DEV, dtype=DTYPE)
    t = statistics.median(time_cuda(lambda: a @ b, warmup=3, iters=10))
    out["gemm_8192^3_bf16_TFLOPs"] = 2 * 8192**3 / (t / 1e3) / 1e12
    a = torch.randn(24576, 4096, device=DEV, dtype=DTYPE)
    b = torch.randn(4096, 16384, device=DEV, dtype=DTYPE)
    t = statistics.median(time_cuda(lambda: a @ b, warmup=3, iters=10))
    out["gemm_24576x4096x16384_bf16_TFLOPs"] = 2 * 24576 * 4096 * 16384 / (t / 1e3) / 1e12
    del a, b
    for n, d in ((6144, 128), (24576, 128)):
        q = torch.randn(1, 32, n, d, device=DEV, dtype=DTYPE)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        for bk in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            try:
                with sdpa_kernel([bk]):
                    t = statistics.median(
                        time_cuda(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q), 2, 5)
                    )
                out[f"sdpa_{bk.name}_32h_{n}x{n}_d{d}_TFLOPs"] = 4 * 32 * n * n * d / (t / 1e3) / 1e12
            except Exception as e:  # noqa: BLE001
                out[f"sdpa_{bk.name}_32h_{n}x{n}_d{d}_TFLOPs"] = f"unavailable: {type(e).__name__}: {str(e)[:120]}"
        del q
    free_cuda()
    return out


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------
def run_transformer_sizes(
    R: dict, name: str, tcfg: dict, transformer, model, *, count: bool, profile: bool, compiled: str | None = None
) -> dict:  # noqa: ANN001
    res = {}
    for size_label, w, h in SIZES:
        stage1 = w == 768
        sigmas = R["DISTILLED_SIGMAS"] if stage1 else R["STAGE_2_DISTILLED_SIGMAS"]
        step_idx = 6 if stage1 else 1  # sigma 0.725 in both schedules (mid-schedule)
        inp = build_inputs(R, w, h, sigmas)
        nv, na = inp["video_state"].latent.shape[1], inp["audio_state"].latent.shape[1]
        step = make_step(R, transformer, inp, step_idx)
        r: dict = {"inputs": describe_inputs(inp, step_idx)}
        log(f"\n[{name}{' ' + compiled if compiled else ''}] {size_label}: video tokens {nv}, audio tokens {na}, "
            f"text tokens {TEXT_TOKENS}, sigma {r['inputs']['sigma']}")
        if compiled:
            torch.cuda.synchronize()
            t0 = time.time()
            out = step()
            torch.cuda.synchronize()
            del out
            r["first_call_s (compile/capture)"] = time.time() - t0
            log(f"  first call (compile/capture incl.): {r['first_call_s (compile/capture)']:.1f} s")
        torch.cuda.reset_peak_memory_stats()
        times = time_cuda(step, warmup=2, iters=5)
        r.update(stats(times))
        r["peak_allocated_GiB"] = torch.cuda.max_memory_allocated() / 2**30
        r["peak_reserved_GiB"] = torch.cuda.max_memory_reserved() / 2**30
        fl = analytic_flops(tcfg, nv, na, TEXT_TOKENS)
        r["analytic"] = fl
        r["achieved_TFLOPs"] = fl["total_flops"] / (r["median_ms"] / 1e3) / 1e12
        log(f"  ms/step median {r['median_ms']:.1f} (min {r['min_ms']:.1f}, max {r['max_ms']:.1f}) all {r['all_ms']}")
        log(f"  peak allocated {r['peak_allocated_GiB']:.2f} GiB, reserved {r['peak_reserved_GiB']:.2f} GiB")
        log(f"  analytic FLOPs/step {fl['total_flops'] / 1e12:.1f} TFLOP (linear {fl['linear_flops'] / 1e12:.1f}, "
            f"attention {fl['attention_flops'] / 1e12:.1f}; per-token AdaLN {fl['per_token_adaln_flops'] / 1e12:.2f}) "
            f"-> achieved {r['achieved_TFLOPs']:.0f} TFLOP/s; floor @790 TFLOP/s = "
            f"{fl['total_flops'] / 790e12 * 1e3:.0f} ms")
        if count:
            try:
                c = hook_count_flops(R, model, step)
                r["hook_count"] = c
                log(f"  hook-counted FLOPs: linear {c['linear'] / 1e12:.3f} T, attention {c['attention'] / 1e12:.3f} T "
                    f"({c['sdpa_calls']} SDPA calls) vs analytic linear {fl['linear_flops'] / 1e12:.3f} T, "
                    f"attention {fl['attention_flops'] / 1e12:.3f} T")
            except Exception:  # noqa: BLE001
                log("  hook count failed:\n" + traceback.format_exc())
        if profile:
            try:
                r["profile"] = profile_step(step, f"{name} {size_label}")
            except Exception:  # noqa: BLE001
                log("  profile failed:\n" + traceback.format_exc())
        res[size_label] = r
        del step, inp
        free_cuda()
    return res


def section_transformer_eager(R: dict, name: str, tcfg: dict, *, count: bool, profile: bool) -> dict:
    free_cuda()
    log(f"  (GPU memory allocated before build: {fmt_gib(torch.cuda.memory_allocated())})")
    t0 = time.time()
    model, x0 = build_transformer(R, tcfg)
    torch.cuda.synchronize()
    desc = describe_model(model)
    desc["build_s"] = time.time() - t0
    desc["weights_allocated_GiB"] = torch.cuda.memory_allocated() / 2**30
    log(f"\n=== {name}: built in {desc['build_s']:.1f} s, weights {desc['weights_allocated_GiB']:.2f} GiB on GPU")
    for k, v in desc.items():
        log(f"  {k}: {v}")
    res = {"model": desc}
    with torch.inference_mode():
        res.update(run_transformer_sizes(R, name, tcfg, x0, model, count=count, profile=profile))
    del model, x0
    free_cuda()
    return res


def section_transformer_compiled(R: dict, name: str, tcfg: dict, capture: bool) -> dict:
    from ltx_core.model.transformer.compiling import CompilationConfig, compile_transformer

    free_cuda()
    log(f"  (GPU memory allocated before build: {fmt_gib(torch.cuda.memory_allocated())})")
    model, _ = build_transformer(R, tcfg)
    cfg = CompilationConfig(capture=capture)
    log(f"\n=== {name} torch.compile via ltx_core compile_transformer({cfg})")
    model = compile_transformer(model, cfg)
    x0 = R["X0Model"](model).to(DEV).eval()
    label = "compiled+capture" if capture else "compiled"
    res = {"compilation_config": repr(cfg)}
    with torch.inference_mode():
        res.update(run_transformer_sizes(R, name, tcfg, x0, model, count=False, profile=False, compiled=label))
    del model, x0
    free_cuda()
    return res


def section_vae(R: dict) -> dict:
    from ltx_core.loader.helpers import create_meta_model
    from ltx_core.model.video_vae import MEMORY_EFFICIENT_DECODE, TileSizeConfig, VideoDecoderConfigurator

    free_cuda()
    metadata = {"config": {"vae": LTX23_VAE}}
    # As ltx_pipelines VideoDecoder: module op MEMORY_EFFICIENT_DECODE + CHANNELS_LAST_3D_WEIGHTS at load.
    dec = create_meta_model(VideoDecoderConfigurator, metadata, (MEMORY_EFFICIENT_DECODE,))
    dec = dec.to(dtype=DTYPE).to_empty(device=DEV)
    g = torch.Generator(device=DEV).manual_seed(1)
    with torch.no_grad():
        for n, p in dec.named_parameters():
            if p.ndim >= 2:
                fan_in = p[0].numel()
                p.normal_(0.0, 1.0 / math.sqrt(fan_in), generator=g)
                if p.ndim == 5:
                    p.data = p.data.contiguous(memory_format=torch.channels_last_3d)
            else:
                p.fill_(1.0) if n.endswith("weight") else p.zero_()
        for n, b in dec.named_buffers():
            b.fill_(1.0) if "std" in n else b.zero_()
    dec.eval()
    n_params = sum(p.numel() for p in dec.parameters())
    latent = torch.randn(1, 128, 16, 32, 48, device=DEV, dtype=DTYPE, generator=g)  # 121 x 1024 x 1536
    tiling = TileSizeConfig.from_long_side(
        long_side=R["CONV_AUTO_LONG_SIDE"],
        height=1024,
        width=1536,
        scale_factors=R["VIDEO_SCALE_FACTORS"],
        frames=R["CONV_AUTO_FRAMES"],
    )
    log(f"\n=== LTX-2.3 conv video VAE decoder: {n_params / 1e6:.1f} M params, latent {tuple(latent.shape)} "
        f"-> 121x1024x1536; default pipeline tiling {tiling}")
    gen = torch.Generator(device=DEV).manual_seed(2)

    def decode():  # noqa: ANN202
        n_frames = 0
        for chunk in dec.decode_video(latent, tiling, gen):  # yields [f, h, w, c] in [0, 1]
            n_frames += chunk.shape[0]
        return n_frames

    res = {"params": n_params, "tiling": repr(tiling)}
    with torch.inference_mode():
        torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        nf = decode()
        torch.cuda.synchronize()
        res["first_call_s"] = time.time() - t0
        res["frames_out"] = nf
        log(f"  first decode {res['first_call_s']:.2f} s, {nf} frames out")
        times = time_cuda(decode, warmup=0, iters=3)
        res.update(stats(times))
        res["peak_allocated_GiB"] = torch.cuda.max_memory_allocated() / 2**30
        res["peak_reserved_GiB"] = torch.cuda.max_memory_reserved() / 2**30
    log(f"  tiled decode median {res['median_ms']:.0f} ms (all {res['all_ms']}), peak allocated "
        f"{res['peak_allocated_GiB']:.2f} GiB, reserved {res['peak_reserved_GiB']:.2f} GiB")
    del dec, latent
    free_cuda()
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=float(os.environ.get("BENCH_BUDGET_S", 570)))
    ap.add_argument("--skip", default="",
                    help="comma list: transformer,ltx25,vae,compile,capture,profile,count,micro")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    log("# Official LTX-2 v1.2.0 (ltx-core) 22B AV transformer benchmark, random bf16 weights")
    log(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, reference {REF}")
    log(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"cuDNN {torch.backends.cudnn.version()}")
    log(f"GPU {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}, "
        f"memory {fmt_gib(torch.cuda.get_device_properties(0).total_memory)}")
    log(f"stubbed (missing) modules: {STUBBED or 'none'}")
    RESULTS["env"] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(0),
        "stubbed": STUBBED,
    }

    R = import_reference()
    log(f"pipeline helpers: {R['pipelines_import']}")
    for mod in ("flash_attn_interface", "flash_attn", "natten", "triton"):
        try:
            importlib.import_module(mod)
            state = "installed"
        except Exception as e:  # noqa: BLE001
            state = f"not available ({type(e).__name__})"
        log(f"  {mod}: {state}")
    attn = R["automatic_attention"]()
    mattn = R["automatic_masked_attention"]()
    try:
        torch_prio = [b.name for b in R["_torch_default_sdpa_priority"]()]
    except Exception as e:  # noqa: BLE001
        torch_prio = f"unavailable ({type(e).__name__})"
    log(f"attention backend (AUTOMATIC): self/unmasked = {R['attention_label'](attn)} "
        f"[{type(attn).__name__}], masked = {R['attention_label'](mattn)}; torch default SDPA priority = {torch_prio}")
    try:
        probe = sdpa_backend_probe()
    except Exception:  # noqa: BLE001
        probe = {"error": traceback.format_exc()[-500:]}
    for k, v in probe.items():
        log(f"  SDPA dispatcher pick for {k}: {v}")
    RESULTS["attention"] = {"automatic": R["attention_label"](attn), "masked": R["attention_label"](mattn),
                            "dispatch_probe": probe}
    save_json()

    if "micro" not in skip:
        try:
            mb = microbench()
            RESULTS["microbench"] = mb
            log("calibration microbenchmarks (same process):")
            for k, v in mb.items():
                log(f"  {k}: {v if isinstance(v, str) else f'{v:.0f}'}")
        except Exception:  # noqa: BLE001
            log("microbench failed:\n" + traceback.format_exc())
    save_json()

    log("\nLTX-2.3 transformer config (checkpoint metadata config.transformer):")
    log(json.dumps(LTX23_TRANSFORMER, sort_keys=True))
    log("LTX-2.5 delta: ff_bias=false, use_keyframes_abs_pos_embedding=true")

    sections = [
        ("LTX-2.3 eager", lambda: section_transformer_eager(
            R, "LTX-2.3 22B", LTX23_TRANSFORMER, count="count" not in skip, profile="profile" not in skip), 0),
        ("LTX-2.5 eager", lambda: section_transformer_eager(
            R, "LTX-2.5 22B", LTX25_TRANSFORMER, count=False, profile=False), 120),
        ("VAE decode", lambda: section_vae(R), 80),
        ("LTX-2.3 compiled", lambda: section_transformer_compiled(R, "LTX-2.3 22B", LTX23_TRANSFORMER, False), 230),
        ("LTX-2.3 compiled+capture", lambda: section_transformer_compiled(
            R, "LTX-2.3 22B", LTX23_TRANSFORMER, True), 100),
    ]
    keys = {"LTX-2.3 eager": "transformer", "LTX-2.5 eager": "ltx25", "VAE decode": "vae",
            "LTX-2.3 compiled": "compile",
            "LTX-2.3 compiled+capture": "capture"}
    for title, fn, need_s in sections:
        if keys.get(title) in skip:
            log(f"\n--- {title}: skipped by --skip")
            RESULTS["sections"][title] = "skipped (--skip)"
            continue
        left = args.budget - elapsed()
        if left < need_s:
            log(f"\n--- {title}: SKIPPED, {left:.0f} s of the {args.budget:.0f} s budget left (< {need_s} s needed)")
            RESULTS["sections"][title] = f"skipped (time budget: {left:.0f} s left)"
            save_json()
            continue
        log(f"\n--- {title} (t={elapsed():.0f} s)")
        try:
            RESULTS["sections"][title] = fn()
        except Exception:  # noqa: BLE001
            tb = traceback.format_exc()
            log(f"--- {title} FAILED:\n{tb}")
            RESULTS["sections"][title] = {"error": tb[-3000:]}
            free_cuda()
        save_json()

    # Summary
    log("\n================ SUMMARY (ms per denoising forward, median of 5 after 2 warm-ups) ================")
    for title, sec in RESULTS["sections"].items():
        if not isinstance(sec, dict) or "error" in sec:
            log(f"{title}: {sec if not isinstance(sec, dict) else 'FAILED'}")
            continue
        for size_label, _, _ in SIZES:
            r = sec.get(size_label)
            if isinstance(r, dict) and "median_ms" in r:
                extra = f", first call {r['first_call_s (compile/capture)']:.1f} s" if "first_call_s (compile/capture)" in r else ""
                log(f"{title:26s} {size_label:18s} {r['median_ms']:9.1f} ms  {r['achieved_TFLOPs']:5.0f} TFLOP/s  "
                    f"peak {r['peak_allocated_GiB']:.1f} GiB{extra}")
        if "median_ms" in sec and title == "VAE decode":
            log(f"{title:26s} 1536x1024x121 tiled {sec['median_ms']:9.0f} ms  peak {sec['peak_allocated_GiB']:.1f} GiB")
    log(f"total wall {elapsed():.0f} s")
    save_json()


if __name__ == "__main__":
    main()
