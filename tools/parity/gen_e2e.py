#!/usr/bin/env python3
"""End-to-end parity fixture: a tiny LTX-2.3 model set and the official pipelines run on it.

Builds, with deterministic random weights (fixed seeds):

  e2e/ltx23_tiny.safetensors            single-file LTX-2.3 checkpoint in the published layout:
                                        transformer + both text connectors (model.diffusion_model.*),
                                        text_embedding_projection.* (FeatureExtractorV2), video VAE
                                        (vae.encoder / vae.decoder / vae.per_channel_statistics),
                                        audio VAE (audio_vae.*), BigVGAN vocoder with bandwidth
                                        extension (vocoder.vocoder / vocoder.bwe_generator /
                                        vocoder.mel_stft); bf16 tensors; metadata `config` with the
                                        transformer, scheduler, vae, audio_vae and vocoder sections,
                                        `model_version` "2.3.0"
  e2e/ltx23_tiny_upsampler_x2.safetensors   spatial x2 latent upsampler (bare keys, flat config)
  e2e/ltx23_tiny_distilled_lora.safetensors rank-2 LoRA (ComfyUI `diffusion_model.*.lora_A/B` keys)

and the tiny Gemma 3 text encoder is the existing fixture tests/fixtures/text_gemma3.te.safetensors
(hidden 24, 6 layers; the checkpoint's caption / connector sizes are chosen to match it).

Then it runs the OFFICIAL reference pipelines (Lightricks LTX-2, ltx_pipelines) on CPU on these files:
DistilledPipeline, TI2VidOneStagePipeline and TI2VidTwoStagesPipeline (and, with
--pipelines ...,two_stage_hq, TI2VidTwoStagesHQPipeline; with --pipelines ...,dfr, DFRPipeline on a
keyframe-embedding variant of the checkpoint, see DFR below), text -> video + audio, and
records, by wrapping the reference's own functions (its source is imported, never copied or edited):
the request, the text contexts, every noise draw, the sigmas, the initial latent states, every
denoiser call (inputs, guided output and the per-pass predictions), the stage outputs, the upsampler
input / output, the final latents, the decoded frames and the audio (decoded mel and waveform).

Two deliberate, documented deviations from a plain CLI run (see NOTES below and the io metadata):
  * float32 everywhere: the pipelines hard-code bfloat16; here every block's dtype is switched to
    float32 after construction and the transformer is built with dtype=float32 (weights are
    bf16-valued; LoRA fusion still happens on the bf16 weights exactly as in the reference).
  * latent widths from the checkpoint: the reference's DiffusionStage builds latent shapes with
    the production widths (video 128 channels, audio 8 channels x 16 mel bins). A tiny model at
    those widths costs > 5 MB (the audio VAE statistics force ddconfig.ch = 128), so the shapes
    are built with the transformer config's widths instead (video in_channels, audio
    audio_in_channels / 16 channels x 16 mel bins) by wrapping the two shape factories.

Usage (a machine with PyTorch + transformers + safetensors; no PyAV needed; CPU):

    CUDA_VISIBLE_DEVICES= PYTHONPATH=<ref>/packages/ltx-core/src:<ref>/packages/ltx-pipelines/src \\
        python3 tools/parity/gen_e2e.py --out OUTDIR

OUTDIR receives e2e/*.safetensors, e2e_text.io.safetensors, e2e_<pipeline>.io.safetensors and
gen_e2e.summary.json; copy them into tests/fixtures/.

DFR (opt-in, --pipelines ...,dfr): DFRPipeline needs a checkpoint whose transformer config sets
use_keyframes_abs_pos_embedding. e2e/ltx23_tiny_kf.safetensors is e2e/ltx23_tiny.safetensors with
that flag and one more tensor, model.diffusion_model.keyframes_abs_pos_embedding [1, 32] (bf16 of
0.5 * N(0, 1), seed SEEDS["keyframes"]); the tensor is also recorded in e2e_dfr.io.safetensors
(in.keyframes_abs_pos_embedding), so only that io file and the temporal upsampler
e2e/ltx23_tiny_upsampler_temporal_x2.safetensors need committing (the C++ test rebuilds the
variant from ltx23_tiny + the recorded tensor). The run: no distilled LoRA, the e2e LoRA as the
detailing IC-LoRA (strength 1, no metadata -> reference downscale factor 2), DFR_ROUNDS temporal
rounds, float32 (its ancestral loop's model_dtype too); decoded frames and waveform are not kept.

Media-input pipelines (opt-in, --pipelines ...,keyframe_interpolation,retake; one runner each in RUNNERS):
KeyframeInterpolationPipeline with two synthetic keyframe images (frames 0 and NUM_FRAMES - 1, written
as lossless PNGs, crf 0; pixels recorded as in.image<i>.pixels), and RetakePipeline (distilled, as its
CLI) on a synthetic source clip served to the reference through its own media-reader contract (pixels
and audio recorded as in.source.*; see run_retake). Deterministic: the same files on every run
(up to the order of the metadata entries).

Audio pipelines (opt-in, --pipelines ...,t2a,a2vid; each has its own runner in PIPELINE_RUNNERS):
  t2a    T2AOneStagePipeline: audio-only transformer, audio CFG/STG guider with modality_scale 1.0,
         NUM_FRAMES / FRAME_RATE seconds of audio; records the audio noise, every denoiser call, the
         final audio latent, the decoded mel and the waveform (no video).
  a2vid  A2VidPipelineTwoStage (two-stage, the e2e LoRA as distilled LoRA): the input audio is a
         synthetic waveform made here (a2vid_input_waveform: 22050 Hz stereo, recorded as
         in.audio.waveform) and handed to the pipeline in place of decode_audio_from_file's result
         (same trim rule: start 0.1 s, the CLI's default max duration num_frames / frame_rate). Needs
         torchaudio (the reference resamples to 16 kHz and takes the log-mel with it). Records the
         decoded input, the encoder's mel input, the encoded latent, both stages and the returned
         audio (the input itself, out.audio.waveform).
IC-LoRA (opt-in, --pipelines ic_lora,ic_lora_mask): ICLoraPipeline with e2e/ltx23_tiny_ic_lora.safetensors
(the e2e LoRA's tensors, metadata reference_downscale_factor "2") as its IC-LoRA at strength 1, at
256x128 (stage 1 at 128x64, the reference video at 64x32). There is no PyAV: the conditioning clip
is a deterministic synthetic u8 clip [12, 48, 30, 3] (in.video_conditioning.frames) handed to the
reference by replacing ltx_pipelines.iclora_utils.decode_video_by_frame (it yields the clip's frames,
stopping at num_frames as the real decoder does); video_preprocess, the video encoder and the
conditioning items are the reference's own. ic_lora: video-conditioning strength 1, both stages.
ic_lora_mask: strength 0.8, a seeded float32 conditioning_attention_mask [1, 1, 9, 128, 64]
(in.conditioning_attention_mask, what ic_lora._load_mask_video returns) at attention strength 0.5,
--skip-stage-2 (the stage-1 latents are decoded at half size). Each run encodes only the positive
prompt, so its io file carries its own out.text.positive.* contexts.
DubIt (opt-in, --pipelines dubit; run_dubit): DubItPipeline with the same IC-LoRA file (fused for both
stages) at 256x128 on a synthetic reference clip (11 frames snapped to 9, 48x30, 24 fps, a 0.5 s stereo
48 kHz track) served through replaced readers (see run_dubit); needs torchaudio.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

# ------------------------------------------------------------------------------------------------
# Environment: PyAV / OpenImageIO / torchaudio are only needed for media I/O and audio *encoding*;
# stub them when absent so the pipeline modules import.
# ------------------------------------------------------------------------------------------------

STUBBED: list[str] = []


def stub_missing_modules() -> None:
    for name in ("av", "OpenImageIO", "torchaudio"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            sys.modules[name] = mock.MagicMock(name=name)
            STUBBED.append(name)


stub_missing_modules()

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import ltx_pipelines.utils.blocks as blocks  # noqa: E402
from ltx_core.components.noisers import GaussianNoiser  # noqa: E402
from ltx_core.loader import LTXV_LORA_COMFY_RENAMING_MAP, LoraPathStrengthAndSDOps  # noqa: E402
from ltx_core.loader.registry import DummyRegistry  # noqa: E402
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder  # noqa: E402
from ltx_core.model.audio_vae import (  # noqa: E402
    AUDIO_VAE_DECODER_COMFY_KEYS_FILTER,
    AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER,
    VOCODER_COMFY_KEYS_FILTER,
    AudioDecoderConfigurator,
    AudioEncoderConfigurator,
    VocoderConfigurator,
)
from ltx_core.model.transformer import LTXV_MODEL_COMFY_RENAMING_MAP, LTXModelConfigurator  # noqa: E402
from ltx_core.model.upsampler import LatentUpsamplerConfigurator  # noqa: E402
from ltx_core.model.video_vae import (  # noqa: E402
    AUTO_TILING,
    VAE_DECODER_COMFY_KEYS_FILTER,
    VAE_ENCODER_COMFY_KEYS_FILTER,
    VideoDecoderConfigurator,
    VideoEncoderConfigurator,
)
from ltx_core.text_encoders.gemma import EMBEDDINGS_PROCESSOR_KEY_OPS, EmbeddingsProcessorConfigurator  # noqa: E402
from ltx_core.types import AudioLatentShape, VideoLatentShape  # noqa: E402

CPU = torch.device("cpu")
PREFIX = "model.diffusion_model."
LOG_LINES: list[str] = []


def log(*args: object) -> None:
    line = " ".join(str(a) for a in args)
    LOG_LINES.append(line)
    print(line, flush=True)


# ------------------------------------------------------------------------------------------------
# The tiny model set
# ------------------------------------------------------------------------------------------------

GEMMA_HIDDEN = 24  # tests/fixtures/text_gemma3.te.safetensors: hidden 24, 6 layers (7 hidden states)
VIDEO_LATENT_CHANNELS = 16
AUDIO_LATENT_CHANNELS = 2
AUDIO_LATENT_MEL_BINS = 16  # mel_bins 64 / 4 (two x2 stages of the audio VAE)

# Keys of every published LTX-2.x transformer section (values as in the real files).
TRANSFORMER_COMMON = {
    "_class_name": "AVTransformer3DModel",
    "activation_fn": "gelu-approximate",
    "attention_bias": True,
    "attention_type": "default",
    "cross_attention_norm": True,
    "double_self_attention": False,
    "dropout": 0.0,
    "norm_elementwise_affine": False,
    "norm_eps": 1e-06,
    "norm_num_groups": 32,
    "num_embeds_ada_norm": 1000,
    "num_vector_embeds": None,
    "only_cross_attention": False,
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
    "use_audio_video_cross_attention": True,
    "share_ff": False,
    "audio_positional_embedding_max_pos": [20],
    "av_cross_ada_norm": True,
    "use_embeddings_connector": True,
    "connector_positional_embedding_max_pos": [4096],
    "connector_num_learnable_registers": 128,
    "connector_norm_output": True,
    "use_middle_indices_grid": True,
    "rope_type": "split",
    "frequencies_precision": "float64",
}
# LTX-2.3 specifics (gated attention, cross-attention AdaLN, FeatureExtractorV2) at tiny sizes.
TRANSFORMER_TINY = {
    "num_layers": 2,
    "num_attention_heads": 2,
    "attention_head_dim": 16,  # video inner dim 32
    "cross_attention_dim": 32,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 8,  # audio inner dim 16
    "audio_cross_attention_dim": 16,
    "in_channels": VIDEO_LATENT_CHANNELS,
    "out_channels": VIDEO_LATENT_CHANNELS,
    "audio_in_channels": AUDIO_LATENT_CHANNELS * AUDIO_LATENT_MEL_BINS,
    "audio_out_channels": AUDIO_LATENT_CHANNELS * AUDIO_LATENT_MEL_BINS,
    "caption_channels": GEMMA_HIDDEN,
    "connector_num_layers": 2,
    "apply_gated_attention": True,
    "connector_apply_gated_attention": True,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "caption_proj_input_norm": False,
    "connector_learnable_registers_std": 1,
    "caption_proj_before_connector": True,
    "connector_num_attention_heads": 2,
    "connector_attention_head_dim": 16,  # = video inner dim
    "audio_connector_num_attention_heads": 2,
    "audio_connector_attention_head_dim": 8,  # = audio inner dim
    "cross_attention_adaln": True,
    "text_encoder_norm_type": "per_token_rms",
}
SCHEDULER_SECTION = {
    "_class_name": "RectifiedFlowScheduler",
    "_diffusers_version": "0.25.1",
    "num_train_timesteps": 1000,
    "shifting": None,
    "base_resolution": None,
    "sampler": "LinearQuadratic",
}


def _res(n: int) -> list:
    return ["res_x", {"num_layers": n}]


def _comp(name: str, mult: int) -> list:
    return [name, {"multiplier": mult}]


# LTX-2.3 conv VAE: the published block layout (x8 time, x32 space) at tiny widths.
VAE_SECTION = {
    "_class_name": "CausalVideoAutoencoder",
    "dims": 3,
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": VIDEO_LATENT_CHANNELS,
    "encoder_blocks": [
        _res(1), _comp("compress_space_res", 1), _res(1), _comp("compress_time_res", 1), _res(1),
        _comp("compress_all_res", 1), _res(1), _comp("compress_all_res", 1), _res(1),
    ],
    "decoder_blocks": [
        _res(1), _comp("compress_space", 2), _res(1), _comp("compress_time", 2), _res(1),
        _comp("compress_all", 1), _res(1), _comp("compress_all", 2), _res(1),
    ],
    "scaling_factor": 1.0,
    "norm_layer": "pixel_norm",
    "patch_size": 4,
    "latent_log_var": "uniform",
    "use_quant_conv": False,
    "causal_decoder": False,
    "timestep_conditioning": False,
    "normalize_latent_channels": False,
    "encoder_base_channels": VIDEO_LATENT_CHANNELS,
    "decoder_base_channels": 4,
    "spatial_padding_mode": "zeros",
}

# Audio VAE: 2 latent channels x 16 latent mel bins (64 mel bins), 16 kHz, hop 160. The per-channel
# statistics have ddconfig.ch entries applied to the patchified latent, so ch = 2 * 16 = 32.
AUDIO_VAE_SECTION = {
    "model": {
        "params": {
            "ddconfig": {
                "double_z": True,
                "mel_bins": 64,
                "z_channels": AUDIO_LATENT_CHANNELS,
                "resolution": 256,
                "downsample_time": False,
                "in_channels": 2,
                "out_ch": 2,
                "ch": AUDIO_LATENT_CHANNELS * AUDIO_LATENT_MEL_BINS,
                "ch_mult": [1, 1, 1],
                "num_res_blocks": 1,
                "attn_resolutions": [],
                "dropout": 0.0,
                "mid_block_add_attention": False,
                "norm_type": "pixel",
                "causality_axis": "height",
            },
            "sampling_rate": 16000,
        }
    },
    "preprocessing": {
        "audio": {"sampling_rate": 16000, "max_wav_value": 32768.0, "duration": 5.12, "stereo": True, "causal_padding": 3},
        "stft": {"filter_length": 1024, "hop_length": 160, "win_length": 1024, "causal": True},
        "mel": {"n_mel_channels": 64, "mel_fmin": 0, "mel_fmax": 8000},
    },
}

_DIL = [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
BWE_N_FFT = 128


def _amp_generator(rates: list[int], kernels: list[int]) -> dict:
    """A BigVGAN-v2 generator section (AMP1 blocks, SnakeBeta), 16 initial channels."""
    return {
        "upsample_initial_channel": 16,
        "resblock": "AMP1",
        "upsample_rates": rates,
        "resblock_kernel_sizes": [3, 7, 11],
        "upsample_kernel_sizes": kernels,
        "resblock_dilation_sizes": _DIL,
        "stereo": True,
        "use_tanh_at_final": False,
        "activation": "snakebeta",
        "use_bias_at_final": False,
    }


# LTX-2.3 vocoder layout (BigVGAN v2 at 16 kHz + bandwidth extension to 48 kHz), tiny widths and
# fewer upsampling stages (products still 160 = mel hop and 240 = 3 x BWE hop).
VOCODER_SECTION = {
    "vocoder": _amp_generator([5, 4, 4, 2], [11, 8, 8, 4]),
    "bwe": {
        **_amp_generator([5, 4, 4, 3], [11, 8, 8, 7]),
        "apply_final_activation": False,
        "input_sampling_rate": 16000,
        "output_sampling_rate": 48000,
        "hop_length": 80,
        "n_fft": BWE_N_FFT,
        "win_size": BWE_N_FFT,
        "num_mels": 64,
    },
}

UPSAMPLER_CONFIG = {
    "_class_name": "LatentUpsampler",
    "in_channels": VIDEO_LATENT_CHANNELS,
    "mid_channels": 32,  # GroupNorm(32, mid_channels) in the upsampler
    "num_blocks_per_stage": 1,
    "dims": 3,
    "spatial_upsample": True,
    "temporal_upsample": False,
    "spatial_scale": 2.0,
    "rational_resampler": False,
}

MODEL_VERSION = "2.3.0"
SEEDS = {"transformer": 7001, "text": 7002, "vae": 7003, "audio_vae": 7004, "vocoder": 7005, "upsampler": 7006, "calib": 7007}
LORA_RANK = 2
LORA_TARGETS = [f"transformer_blocks.{i}.attn1.{p}" for i in range(2) for p in ("to_q", "to_k", "to_v", "to_out.0")]

CKPT_NAME = "e2e/ltx23_tiny.safetensors"
UPSAMPLER_NAME = "e2e/ltx23_tiny_upsampler_x2.safetensors"
LORA_NAME = "e2e/ltx23_tiny_distilled_lora.safetensors"
KF_CKPT_NAME = "e2e/ltx23_tiny_kf.safetensors"  # DFR only, not committed (see the module docstring)
TEMPORAL_UPSAMPLER_NAME = "e2e/ltx23_tiny_upsampler_temporal_x2.safetensors"
TEMPORAL_UPSAMPLER_CONFIG = {**UPSAMPLER_CONFIG, "spatial_upsample": False, "temporal_upsample": True, "spatial_scale": 1.0}
DFR_SEEDS = {"keyframes": 7009, "temporal_upsampler": 7010}
DFR_ROUNDS = 2  # 9 frames -> canvas 25 [24]; round 1: 49 frames, 1 tile; round 2: 97 frames, 2 tiles -> 33 frames
GEMMA_NAME = "text_gemma3.te.safetensors"
GEMMA_ROOT_NAME = "text_gemma3_root"

# ------------------------------------------------------------------------------------------------
# The requests
# ------------------------------------------------------------------------------------------------

PROMPT = "A red fox trots through fresh snow at dawn, its breath visible, while birds sing in the pines."
SEED = 42
FRAME_RATE = 24.0
NUM_FRAMES = 9
GUIDED_STEPS = 4
STG_BLOCKS = [1]  # the LTX-2.3 preset perturbs block 28; the tiny model has 2 blocks


def guider_params(kind: str) -> dict:
    """LTX_2_3_PARAMS (ltx_pipelines.utils.constants) with stg_blocks scaled to 2 blocks."""
    if kind == "video":
        return {"cfg_scale": 3.0, "stg_scale": 1.0, "rescale_scale": 0.7, "modality_scale": 3.0, "skip_step": 0, "stg_blocks": STG_BLOCKS}
    return {"cfg_scale": 7.0, "stg_scale": 1.0, "rescale_scale": 0.7, "modality_scale": 3.0, "skip_step": 0, "stg_blocks": STG_BLOCKS}


PIPELINES = {
    "distilled": {"height": 128, "width": 64},
    "one_stage": {"height": 64, "width": 64},
    "two_stage": {"height": 128, "width": 64},
    "two_stage_hq": {"height": 128, "width": 64},
    "dfr": {"height": 128, "width": 64},
    "keyframe_interpolation": {"height": 128, "width": 64},
    "retake": {"height": 64, "width": 96},  # the source clip's size (the pipeline runs at the clip's size)
    "t2a": {"height": None, "width": None},  # audio only: T2AOneStagePipeline's placeholder pixel size
    "a2vid": {"height": 128, "width": 64},
    "ic_lora": {"height": 256, "width": 128},
    "ic_lora_mask": {"height": 256, "width": 128},
    "dubit": {"height": 256, "width": 128},  # stage 1 128x64; the reference video at 64x32 (stage 1) and 128x64 (stage 2)
}

# TI2VidTwoStagesHQPipeline: LTX_2_3_HQ_PARAMS guiders (STG off, so no blocks to scale) and the
# hq_2_stage_arg_parser defaults for the distilled LoRA strengths.
HQ_GUIDERS = {
    "video": {"cfg_scale": 3.0, "stg_scale": 0.0, "rescale_scale": 0.45, "modality_scale": 3.0, "skip_step": 0, "stg_blocks": []},
    "audio": {"cfg_scale": 7.0, "stg_scale": 0.0, "rescale_scale": 1.0, "modality_scale": 3.0, "skip_step": 0, "stg_blocks": []},
}
HQ_LORA_STRENGTHS = (0.25, 0.5)

# ------------------------------------------------------------------------------------------------
# Random weights
# ------------------------------------------------------------------------------------------------


def init_state(model: torch.nn.Module, seed: int, *, stats_mean_std: float = 0.3) -> tuple[dict, dict]:
    """Deterministic random values for every state-dict entry of ``model`` (keys sorted, one generator).

    Returns (model-key -> float32 tensor, model-key -> rule). Fixed buffers the checkpoint carries
    (anti-alias filters, blur kernels) keep the module's own values.
    """
    g = torch.Generator().manual_seed(seed)
    sd = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    rules: dict[str, str] = {}
    for name in sorted(sd):
        ref = sd[name]
        shape = tuple(ref.shape)
        mod_name, _, leaf = name.rpartition(".")
        mod = model.get_submodule(mod_name) if mod_name else model
        if leaf in ("filter", "kernel"):
            t, r = ref.detach().float().clone(), "module value"
        elif leaf in ("mel_basis", "forward_basis", "inverse_basis"):
            t, r = ref.detach().float().clone(), "replaced by stft_bases()"
        elif leaf == "mean-of-means":
            t, r = stats_mean_std * torch.randn(shape, generator=g), f"N(0, {stats_mean_std}^2)"
        elif leaf in ("std-of-means", "mean-of-stds"):
            t, r = 0.5 + torch.rand(shape, generator=g), "U(0.5, 1.5)"
        elif leaf == "channel":
            t, r = torch.arange(shape[0], dtype=torch.float32), "arange"
        elif leaf == "alpha":
            t, r = 0.3 * torch.randn(shape, generator=g), "N(0, 0.3^2)"
        elif leaf == "beta":
            t, r = 1.0 + 0.3 * torch.randn(shape, generator=g), "1 + N(0, 0.3^2)"
        elif name.endswith(("q_norm.weight", "k_norm.weight")):
            t, r = 1.0 + 0.1 * torch.randn(shape, generator=g), "1 + N(0, 0.1^2)"
        elif "scale_shift_table" in name:
            t, r = 0.1 * torch.randn(shape, generator=g), "N(0, 0.1^2)"
        elif leaf == "keyframes_abs_pos_embedding":
            t, r = 0.5 * torch.randn(shape, generator=g), "N(0, 0.5^2)"
        elif leaf == "learnable_registers":
            t, r = torch.rand(shape, generator=g) * 2.0 - 1.0, "U(-1, 1)"
        elif leaf == "weight" and len(shape) == 1:
            t, r = 1.0 + 0.1 * torch.randn(shape, generator=g), "1 + N(0, 0.1^2) (norm weight)"
        elif leaf == "bias":
            t, r = 0.1 * torch.randn(shape, generator=g), "N(0, 0.1^2)"
        elif leaf == "weight" and isinstance(mod, torch.nn.ConvTranspose1d):
            fan = shape[0] * shape[2] / mod.stride[0]
            t, r = torch.randn(shape, generator=g) / math.sqrt(fan), "N(0, stride / (in * k))"
        elif leaf == "weight" and len(shape) >= 2:
            t, r = torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:])), "N(0, 1/fan_in)"
        else:
            raise ValueError(f"no init rule for {name} {shape} ({type(mod).__name__})")
        out[name] = t.float().contiguous()
        rules[name] = r
    return out, rules


def slaney_mel_filterbank(n_freqs: int, n_mels: int, sample_rate: int, f_min: float, f_max: float) -> torch.Tensor:
    """Triangular mel filters on the Slaney mel scale with Slaney area normalisation, [n_mels, n_freqs]
    (the filterbank torchaudio.functional.melscale_fbanks(norm='slaney', mel_scale='slaney') gives)."""

    def hz_to_mel(f: torch.Tensor) -> torch.Tensor:
        lin = 3.0 * f / 200.0
        log_part = 15.0 + torch.log(torch.clamp(f, min=1e-10) / 1000.0) / (math.log(6.4) / 27.0)
        return torch.where(f >= 1000.0, log_part, lin)

    def mel_to_hz(m: torch.Tensor) -> torch.Tensor:
        lin = 200.0 * m / 3.0
        log_part = 1000.0 * torch.exp((math.log(6.4) / 27.0) * (m - 15.0))
        return torch.where(m >= 15.0, log_part, lin)

    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs, dtype=torch.float64)
    m_pts = torch.linspace(
        float(hz_to_mel(torch.tensor(f_min, dtype=torch.float64))),
        float(hz_to_mel(torch.tensor(f_max, dtype=torch.float64))),
        n_mels + 2,
        dtype=torch.float64,
    )
    f_pts = mel_to_hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = torch.clamp(torch.minimum(down, up), min=0.0)
    enorm = 2.0 / (f_pts[2 : n_mels + 2] - f_pts[:n_mels])
    return (fb * enorm[None, :]).T.contiguous()


def stft_bases(n_fft: int, hop: int, n_mels: int) -> dict[str, torch.Tensor]:
    """MelSTFT buffers: forward_basis = [cos; -sin] DFT rows x periodic Hann window [2F, 1, n_fft];
    inverse_basis = pinv(n_fft/hop * DFT rows)^T x window (unused by the forward); mel_basis [n_mels, F]."""
    n_freqs = n_fft // 2 + 1
    n = torch.arange(n_fft, dtype=torch.float64)
    k = torch.arange(n_freqs, dtype=torch.float64)[:, None]
    ang = 2.0 * math.pi * k * n / n_fft
    fourier = torch.cat([torch.cos(ang), -torch.sin(ang)], dim=0)
    window = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
    forward = (fourier * window)[:, None, :]
    inverse = (torch.linalg.pinv(fourier * (n_fft / hop)).T * window)[:, None, :]
    mel = slaney_mel_filterbank(n_freqs, n_mels, 16000, 0.0, 8000.0)
    return {
        "mel_stft.mel_basis": mel.float(),
        "mel_stft.stft_fn.forward_basis": forward.float(),
        "mel_stft.stft_fn.inverse_basis": inverse.float(),
    }


def bf16(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.bfloat16).contiguous()


def load_into(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"state mismatch: missing {missing[:5]} unexpected {unexpected[:5]}")
    return model.float().eval()


class Capture:
    """Keeps the output of a module's forward."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.out: torch.Tensor | None = None
        self.h = module.register_forward_hook(self._hook)

    def _hook(self, _m, _i, o) -> None:
        self.out = o.detach().clone()

    def close(self) -> None:
        self.h.remove()


def scale_module_output(module: torch.nn.Module, state: dict[str, torch.Tensor], prefix: str, scale: float, shift: float = 0.0) -> None:
    """out -> scale * out + shift for a conv whose weight / bias live under ``prefix``."""
    state[prefix + "weight"] = state[prefix + "weight"] * scale
    if prefix + "bias" in state:
        state[prefix + "bias"] = state[prefix + "bias"] * scale + shift
    elif shift != 0.0:
        raise ValueError(f"{prefix}: no bias to shift")


def find_conv_prefix(state: dict[str, torch.Tensor], module_path: str) -> str:
    """'conv_out' -> 'conv_out.' or 'conv_out.conv.' (causal conv wrappers keep the Conv under .conv)."""
    for p in (module_path + ".conv.", module_path + "."):
        if p + "weight" in state:
            return p
    raise KeyError(module_path)


def captured_output(model: torch.nn.Module, layer: torch.nn.Module, *inputs: torch.Tensor) -> torch.Tensor:
    """Runs ``model(*inputs)`` and returns what ``layer`` produced on the way."""
    cap = Capture(layer)
    try:
        with torch.inference_mode():
            model(*inputs)
    finally:
        cap.close()
    return cap.out


def emit_vae(ckpt: dict, prefix: str, enc_w: dict, dec_w: dict) -> None:
    """Published VAE layout: <prefix>encoder.*, <prefix>decoder.*, one <prefix>per_channel_statistics.*."""
    for k, v in enc_w.items():
        if not k.startswith("per_channel_statistics."):
            ckpt[prefix + "encoder." + k] = v
    for k, v in dec_w.items():
        ckpt[prefix + ("" if k.startswith("per_channel_statistics.") else "decoder.") + k] = v


def share_statistics(dec_w: dict, enc_w: dict) -> None:
    """One set of per_channel_statistics serves encoder and decoder (a single key in the file)."""
    for k in list(enc_w):
        if k.startswith("per_channel_statistics."):
            if k in dec_w:
                enc_w[k] = dec_w[k]
            else:
                dec_w[k] = enc_w[k]


def build_weights(gemma_path: str) -> tuple[dict, dict, dict, dict, dict]:
    """Returns (checkpoint tensors, upsampler tensors, lora tensors, metadata dict, notes)."""
    notes: dict = {"init_rules": {}}
    md = {
        "config": {
            "transformer": {**TRANSFORMER_COMMON, **TRANSFORMER_TINY},
            "scheduler": SCHEDULER_SECTION,
            "vae": VAE_SECTION,
            "audio_vae": AUDIO_VAE_SECTION,
            "vocoder": VOCODER_SECTION,
        },
        "model_version": MODEL_VERSION,
    }
    ckpt: dict[str, torch.Tensor] = {}

    # transformer
    tr = LTXModelConfigurator.from_metadata(md)
    w, rules = init_state(tr, SEEDS["transformer"])
    ckpt.update({PREFIX + k: v for k, v in w.items()})
    notes["init_rules"]["transformer"] = sorted(set(rules.values()))
    log(f"  transformer: {len(w)} tensors, {sum(v.numel() for v in w.values())} values")

    # text connectors + text_embedding_projection (EmbeddingsProcessor keys -> published names)
    ep = EmbeddingsProcessorConfigurator.with_gemma_model_path(gemma_path).from_metadata(md)
    w, rules = init_state(ep, SEEDS["text"])
    for k, v in w.items():
        key = text_key_to_ckpt(k)
        if key is None:
            raise KeyError(k)
        ckpt[key] = v
    notes["init_rules"]["text"] = sorted(set(rules.values()))
    log(f"  text connectors + projection: {len(w)} tensors")

    # video VAE (statistics shared by encoder and decoder)
    enc = VideoEncoderConfigurator.from_metadata(md)
    dec = VideoDecoderConfigurator.from_metadata(md)
    dec_w, r1 = init_state(dec, SEEDS["vae"])
    enc_w, r2 = init_state(enc, SEEDS["vae"] + 1)
    share_statistics(dec_w, enc_w)
    # calibration: decoder output (before the [-1, 1] -> [0, 1] map) std 0.5 for an N(0, 1) latent
    g = torch.Generator().manual_seed(SEEDS["calib"])
    z = torch.randn(1, VIDEO_LATENT_CHANNELS, 2, 4, 2, generator=g)
    load_into(dec, dec_w)
    std = float(captured_output(dec, dec.conv_out, z).std())
    scale_module_output(dec, dec_w, find_conv_prefix(dec_w, "conv_out"), 0.5 / std)
    notes["calibration_video_decoder"] = f"conv_out scaled by 0.5 / {std:.6g} (decoder output std 0.5 for an N(0,1) latent [1,16,2,4,2])"
    emit_vae(ckpt, "vae.", enc_w, dec_w)
    notes["init_rules"]["vae"] = sorted(set(r1.values()) | set(r2.values()))
    log(f"  video VAE: encoder {len(enc_w)}, decoder {len(dec_w)} tensors")

    # audio VAE (statistics shared) + calibration of the decoded log-mel (mean -4, std 1.5)
    adec = AudioDecoderConfigurator.from_metadata(md)
    aenc = AudioEncoderConfigurator.from_metadata(md)
    adec_w, r1 = init_state(adec, SEEDS["audio_vae"], stats_mean_std=0.5)
    aenc_w, r2 = init_state(aenc, SEEDS["audio_vae"] + 1, stats_mean_std=0.5)
    share_statistics(adec_w, aenc_w)
    za = torch.randn(1, AUDIO_LATENT_CHANNELS, 9, AUDIO_LATENT_MEL_BINS, generator=g)
    load_into(adec, adec_w)
    out = captured_output(adec, adec.conv_out, za)
    m, s = float(out.mean()), float(out.std())
    a = 1.5 / s
    scale_module_output(adec, adec_w, find_conv_prefix(adec_w, "conv_out"), a, -4.0 - a * m)
    notes["calibration_audio_decoder"] = f"conv_out mapped out -> (out - {m:.6g}) * 1.5 / {s:.6g} - 4 (log-mel mean -4, std 1.5 for an N(0,1) latent [1,2,9,16])"
    load_into(adec, adec_w)
    with torch.inference_mode():
        mel = adec(za)
    emit_vae(ckpt, "audio_vae.", aenc_w, adec_w)
    notes["init_rules"]["audio_vae"] = sorted(set(r1.values()) | set(r2.values()))
    log(f"  audio VAE: encoder {len(aenc_w)}, decoder {len(adec_w)} tensors")

    # vocoder + BWE; STFT / mel bases are the real transforms; conv_post layers calibrated
    voc = VocoderConfigurator.from_metadata(md)
    voc_w, rules = init_state(voc, SEEDS["vocoder"])
    voc_w.update(stft_bases(BWE_N_FFT, VOCODER_SECTION["bwe"]["hop_length"], VOCODER_SECTION["bwe"]["num_mels"]))
    load_into(voc, voc_w)
    s = float(captured_output(voc.vocoder, voc.vocoder.conv_post, mel).std())
    scale_module_output(voc, voc_w, "vocoder.conv_post.", 0.3 / s)
    load_into(voc, voc_w)
    with torch.inference_mode():
        x = voc.vocoder(mel)
        hop = VOCODER_SECTION["bwe"]["hop_length"]
        if x.shape[-1] % hop:
            x = torch.nn.functional.pad(x, (0, hop - x.shape[-1] % hop))
        res = voc.bwe_generator(voc._compute_mel(x).transpose(2, 3))  # noqa: SLF001
    s2 = float(res.std())
    scale_module_output(voc, voc_w, "bwe_generator.conv_post.", 0.1 / s2)
    notes["calibration_vocoder"] = (
        f"vocoder.conv_post scaled by 0.3 / {s:.6g} (16 kHz output std 0.3 before the clamp), "
        f"bwe_generator.conv_post by 0.1 / {s2:.6g} (BWE residual std 0.1), on the calibrated decoder's mel"
    )
    ckpt.update({"vocoder." + k: v for k, v in voc_w.items()})
    notes["init_rules"]["vocoder"] = sorted(set(rules.values())) + [
        "mel_stft: forward_basis = [cos; -sin] DFT rows x periodic Hann, inverse_basis = pinv(n_fft/hop * DFT)^T x window, "
        "mel_basis = Slaney-scale triangular filters with Slaney normalisation (0-8000 Hz, 16 kHz)"
    ]
    log(f"  vocoder: {len(voc_w)} tensors")

    # spatial x2 upsampler
    ups = LatentUpsamplerConfigurator.from_metadata({"config": UPSAMPLER_CONFIG})
    ups_w, rules = init_state(ups, SEEDS["upsampler"])
    notes["init_rules"]["upsampler"] = sorted(set(rules.values()))

    # distilled LoRA: small dyadic integers so that the reference's bf16 fusion ((B * s) @ A in
    # bf16, + W in bf16) is exact and order independent
    lora: dict[str, torch.Tensor] = {}
    gl = torch.Generator().manual_seed(SEEDS["transformer"] + 100)
    for t in LORA_TARGETS:
        wt = ckpt[PREFIX + t + ".weight"]
        out_f, in_f = wt.shape
        lora[f"diffusion_model.{t}.lora_A.weight"] = torch.randint(-3, 4, (LORA_RANK, in_f), generator=gl).float() / 32.0
        lora[f"diffusion_model.{t}.lora_B.weight"] = torch.randint(-3, 4, (out_f, LORA_RANK), generator=gl).float() / 32.0
    notes["lora"] = (
        f"rank {LORA_RANK} on {LORA_TARGETS}; lora_A [r, in], lora_B [out, r], entries k/32 with k uniform in [-3, 3] "
        "(exact in bf16; every (B*strength) @ A sum is exact, so the reference's bf16 fusion is deterministic)"
    )
    return (
        {k: bf16(v) for k, v in sorted(ckpt.items())},
        {k: bf16(v) for k, v in sorted(ups_w.items())},
        {k: bf16(v) for k, v in sorted(lora.items())},
        md,
        notes,
    )


def build_dfr_weights(ckpt: dict) -> tuple[dict, dict, torch.Tensor, dict]:
    """The keyframe-embedding checkpoint variant, the temporal x2 upsampler and the embedding."""
    inner = TRANSFORMER_TINY["num_attention_heads"] * TRANSFORMER_TINY["attention_head_dim"]
    g = torch.Generator().manual_seed(DFR_SEEDS["keyframes"])
    embedding = bf16(0.5 * torch.randn(1, inner, generator=g))
    kf = dict(ckpt)
    kf[PREFIX + "keyframes_abs_pos_embedding"] = embedding
    tups = LatentUpsamplerConfigurator.from_metadata({"config": TEMPORAL_UPSAMPLER_CONFIG})
    tw, rules = init_state(tups, DFR_SEEDS["temporal_upsampler"])
    notes = {
        "keyframes_abs_pos_embedding": f"[1, {inner}] bf16(0.5 * N(0, 1)), torch.Generator().manual_seed({DFR_SEEDS['keyframes']})",
        "temporal_upsampler_init": sorted(set(rules.values())),
    }
    return {k: v for k, v in sorted(kf.items())}, {k: bf16(v) for k, v in sorted(tw.items())}, embedding, notes


def write_safetensors(path: Path, tensors: dict, metadata: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in metadata.items()}
    save_file({k: v.detach().cpu().clone().contiguous() for k, v in tensors.items()}, str(path), metadata=meta)
    log(f"  wrote {path} ({len(tensors)} tensors, {path.stat().st_size} bytes)")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def text_key_to_ckpt(k: str) -> str | None:
    """Inverse of EMBEDDINGS_PROCESSOR_KEY_OPS."""
    for model_prefix, file_prefix in (
        ("feature_extractor.", "text_embedding_projection."),
        ("video_connector.", PREFIX + "video_embeddings_connector."),
        ("audio_connector.", PREFIX + "audio_embeddings_connector."),
    ):
        if k.startswith(model_prefix):
            return file_prefix + k[len(model_prefix) :]
    return None


def check_official_load(ckpt_path: Path, ups_path: Path, ckpt: dict, ups: dict, gemma_path: str) -> dict:
    """Loads every component back through the reference's builders and key maps; compares bit-exactly."""
    results = {}

    def check(tag, configurator, path, sd_ops, expected_prefix_map):
        builder = SingleGPUModelBuilder(model_class_configurator=configurator, model_path=str(path), model_sd_ops=sd_ops, registry=DummyRegistry())
        model = builder.build(device=CPU, dtype=torch.float32)
        sd = model.state_dict()
        n_ok, bad = 0, []
        for k, v in sd.items():
            src = expected_prefix_map(k)
            if src is None:
                continue
            ref = ckpt.get(src) if path == ckpt_path else ups.get(src)
            if ref is None or not torch.equal(v.float(), ref.float()):
                bad.append(k)
            else:
                n_ok += 1
        meta = [n for n, p in list(model.named_parameters()) + list(model.named_buffers()) if p.is_meta]
        results[tag] = {"matched": n_ok, "mismatched": bad[:10], "left_on_meta": meta[:10]}
        log(f"  [load {tag}] {n_ok} tensors bit-exact, mismatched {len(bad)}, on meta {len(meta)}")

    def vae_map(part):
        return lambda k: ("vae." + k) if k.startswith("per_channel_statistics.") else f"vae.{part}." + k

    def audio_map(part):
        return lambda k: ("audio_vae." + k) if k.startswith("per_channel_statistics.") else f"audio_vae.{part}." + k

    check("transformer", LTXModelConfigurator, ckpt_path, LTXV_MODEL_COMFY_RENAMING_MAP, lambda k: PREFIX + k)
    check(
        "embeddings_processor",
        EmbeddingsProcessorConfigurator.with_gemma_model_path(gemma_path),
        ckpt_path,
        EMBEDDINGS_PROCESSOR_KEY_OPS,
        text_key_to_ckpt,
    )
    check("video_encoder", VideoEncoderConfigurator, ckpt_path, VAE_ENCODER_COMFY_KEYS_FILTER, vae_map("encoder"))
    check("video_decoder", VideoDecoderConfigurator, ckpt_path, VAE_DECODER_COMFY_KEYS_FILTER, vae_map("decoder"))
    check("audio_decoder", AudioDecoderConfigurator, ckpt_path, AUDIO_VAE_DECODER_COMFY_KEYS_FILTER, audio_map("decoder"))
    check("audio_encoder", AudioEncoderConfigurator, ckpt_path, AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER, audio_map("encoder"))
    check("vocoder", VocoderConfigurator, ckpt_path, VOCODER_COMFY_KEYS_FILTER, lambda k: "vocoder." + k)
    check("upsampler", LatentUpsamplerConfigurator, ups_path, None, lambda k: k)
    return results


# ------------------------------------------------------------------------------------------------
# Recording around the reference's functions
# ------------------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.t: dict[str, torch.Tensor] = {}
        self.calls: dict[str, str] = {}
        self.stage = 0
        self.label = ""
        self.noise_order: list[str] = []
        self.step_sigmas: dict[int, list[float]] = {}
        self.contexts: list = []
        self.prompts: list = []
        self.tiling: object = None
        self.audio_rate: int | None = None
        self.ups_calls = 0

    def put(self, name: str, value: torch.Tensor, call: str | None = None) -> None:
        if name in self.t:
            raise RuntimeError(f"recorded twice: {name}")
        self.t[name] = value.detach().cpu().clone().contiguous()
        if call is not None:
            self.calls[name] = call


R = Recorder()


def _modality_of(tools: object) -> str:
    return "audio" if "Audio" in type(tools).__name__ else "video"


def install_recorders() -> None:
    """Wraps reference callables (module / class attributes); the wrapped originals still do all the work."""
    orig_sample_noise = GaussianNoiser._sample_noise  # noqa: SLF001

    def sample_noise(self, latent_state):
        noise = orig_sample_noise(self, latent_state)
        name = f"in.noise.stage{R.stage}.{R.label}"
        R.put(name, noise, f"GaussianNoiser._sample_noise: torch.randn({list(noise.shape)}, dtype={noise.dtype}, generator=<the pipeline's CPU generator>), draw #{len(R.noise_order)} of the run")
        R.noise_order.append(name)
        return noise

    GaussianNoiser._sample_noise = sample_noise  # noqa: SLF001

    orig_build_state = blocks._build_state  # noqa: SLF001

    def build_state(spec, tools, noiser, dtype, device):
        R.label = _modality_of(tools)
        state = orig_build_state(spec, tools, noiser, dtype, device)
        p = f"inter.stage{R.stage}.{R.label}"
        R.put(p + ".initial_latent", state.latent, "blocks._build_state(...).latent: patchified [B, T, C] tokens after GaussianNoiser (lerp(clean, lerp(initial, noise, noise_scale), denoise_mask))")
        R.put(p + ".positions", state.positions, "initial state's positions [B, n_axes, T, 2]")
        R.put(p + ".denoise_mask", state.denoise_mask, "initial state's denoise mask")
        if spec.initial_latent is not None:
            R.put(p + ".clean_latent", state.clean_latent, "initial state's clean latent (patchified ModalitySpec.initial_latent)")
        if getattr(state, "attention_mask", None) is not None:
            R.put(p + ".attention_mask", state.attention_mask, "initial state's self-attention mask [B, T, T] (built by an attention-strength conditioning)")
        R.calls[p + ".noise_scale"] = str(spec.noise_scale)
        return state

    blocks._build_state = build_state  # noqa: SLF001

    orig_stage_call = blocks.DiffusionStage.__call__

    def stage_call(self, *args, **kwargs):
        R.stage += 1
        s = R.stage
        sig = kwargs["sigmas"]
        R.put(f"in.sigmas.stage{s}", sig.float(), "the sigmas DiffusionStage.__call__ received (float32)")
        R.calls[f"stage{s}"] = json.dumps(
            {
                "width": kwargs.get("width"),
                "height": kwargs.get("height"),
                "frames": kwargs.get("frames"),
                "fps": kwargs.get("fps"),
                "denoiser": type(kwargs["denoiser"]).__name__,
                "stepper": type(kwargs["stepper"]).__name__ if kwargs.get("stepper") is not None else "EulerDiffusionStep (default)",
                "loop": getattr(kwargs.get("loop"), "__name__", None)
                or getattr(getattr(kwargs.get("loop"), "func", None), "__name__", None)
                or "euler_denoising_loop (default)",
                "loop_keywords": {k: v for k, v in (getattr(kwargs.get("loop"), "keywords", None) or {}).items() if isinstance(v, (int, float, str))},
                "stepper_eta": getattr(kwargs.get("stepper"), "eta", None),
                "video_conditionings": [type(c).__name__ for c in kwargs["video"].conditionings] if kwargs.get("video") is not None else None,
                "video_noise_scale": kwargs["video"].noise_scale if kwargs.get("video") is not None else None,
                "audio_noise_scale": kwargs["audio"].noise_scale if kwargs.get("audio") is not None else None,
                "video_initial_latent": kwargs["video"].initial_latent is not None if kwargs.get("video") is not None else None,
                "audio_initial_latent": kwargs["audio"].initial_latent is not None if kwargs.get("audio") is not None else None,
                "max_batch_size": kwargs.get("max_batch_size", 1),
                "loras": [Path(str(lo.path)).name + f" x{lo.strength}" for lo in getattr(self._transformer_builder, "loras", ())],  # noqa: SLF001
            }
        )
        by_call = "res2s" in (getattr(kwargs.get("loop"), "__name__", None) or getattr(getattr(kwargs.get("loop"), "func", None), "__name__", "") or "")
        kwargs["denoiser"] = RecordingDenoiser(kwargs["denoiser"], s, by_call=by_call)
        video_state, audio_state = orig_stage_call(self, *args, **kwargs)
        if video_state is not None:
            R.put(f"out.stage{s}.video_latent", video_state.latent, "DiffusionStage returned video latent [B, C, F, H, W] (unpatchified)")
        if audio_state is not None:
            R.put(f"out.stage{s}.audio_latent", audio_state.latent, "DiffusionStage returned audio latent [B, C, T, mel] (unpatchified)")
        return video_state, audio_state

    blocks.DiffusionStage.__call__ = stage_call

    orig_build_transformer = blocks.DiffusionStage._build_transformer  # noqa: SLF001

    def build_transformer(self, **kwargs):
        kwargs.setdefault("dtype", self._dtype)  # noqa: SLF001
        return orig_build_transformer(self, **kwargs)

    blocks.DiffusionStage._build_transformer = build_transformer  # noqa: SLF001

    orig_ups = blocks.VideoUpsampler.__call__

    def ups_call(self, latent):
        # The first call keeps the plain name; DFR upsamples more than once (its stage-1 keyframes,
        # the stage-1 video, then once per temporal round): inter.upsampler<n>.* for n >= 1.
        p = "inter.upsampler" if R.ups_calls == 0 else f"inter.upsampler{R.ups_calls}"
        R.ups_calls += 1
        R.put(p + ".in", latent, "VideoUpsampler input (stage-1 video latent [:1]; DFR: call order keyframes, video, temporal rounds)")
        out = orig_ups(self, latent)
        R.put(p + ".out", out, "VideoUpsampler output = upsample_video(latent, encoder, upsampler)")
        return out

    blocks.VideoUpsampler.__call__ = ups_call

    orig_pe = blocks.PromptEncoder.__call__

    def pe_call(self, prompts, **kwargs):
        out = orig_pe(self, prompts, **kwargs)
        R.prompts = list(prompts)
        R.contexts = out
        return out

    blocks.PromptEncoder.__call__ = pe_call

    orig_vd = blocks.VideoDecoder.__call__

    def vd_call(self, latent, tiling_config=None, generator=None, *, dtype=None):
        R.put("out.video.latent", latent, "VideoDecoder input: the final video latent [1, C, F, H, W]")
        R.tiling = tiling_config
        return orig_vd(self, latent, tiling_config, generator, dtype=dtype)

    blocks.VideoDecoder.__call__ = vd_call

    orig_decode_audio = blocks.vae_decode_audio

    def decode_audio(latent, audio_decoder, vocoder):
        R.put("out.audio.latent", latent, "AudioDecoder input: the final audio latent [1, C, T, mel]")
        cap = Capture(audio_decoder)
        try:
            audio = orig_decode_audio(latent, audio_decoder, vocoder)
        finally:
            cap.close()
        R.put("out.audio.mel", cap.out, "audio VAE decoder output (log-mel [1, 2, T_mel, 64]), the vocoder's input")
        R.put("out.audio.waveform", audio.waveform, "decode_audio(...).waveform [2, N] float32 (VocoderWithBWE, clamped to [-1, 1])")
        R.audio_rate = int(audio.sampling_rate)
        return audio

    blocks.vae_decode_audio = decode_audio


class RecordingDenoiser:
    """Forwards to the pipeline's denoiser and keeps each call's inputs and outputs."""

    def __init__(self, inner, stage: int, by_call: bool = False) -> None:
        self.inner = inner
        self.stage = stage
        # res_2s calls the denoiser twice per step (the midpoint call with step_index 0), and once
        # more at sigma 0.0011: name its records by call number instead of step index.
        self.by_call = by_call
        self.calls = 0

    def __call__(self, transformer, video_state, audio_state, sigmas, step_index):
        p = f"inter.stage{self.stage}.call{self.calls}" if self.by_call else f"inter.stage{self.stage}.step{step_index}"
        self.calls += 1
        if video_state is not None:
            R.put(p + ".video_in", video_state.latent, "denoiser input: video state latent [B, T, C]")
        if audio_state is not None:
            R.put(p + ".audio_in", audio_state.latent, "denoiser input: audio state latent [B, T, C]")
        R.calls[p + ".sigma"] = repr(float(sigmas[step_index]))
        vr, ar = self.inner(transformer, video_state, audio_state, sigmas, step_index)
        for mod, res in (("video", vr), ("audio", ar)):
            if res is None:
                continue
            R.put(f"{p}.{mod}_denoised", res.denoised, "denoiser output: guided denoised prediction [B, T, C] (before the loop's mask blend)")
            for part in ("cond", "uncond", "ptb", "mod"):
                v = getattr(res, part, None)
                if isinstance(v, torch.Tensor) and v.dim() > 0:
                    R.put(f"{p}.{mod}_{part}", v, f"guided denoiser's '{part}' pass (X0Model output) [B, T, C]")
        return vr, ar


def force_float32(pipe) -> None:
    """The pipelines hard-code bfloat16; run every block in float32 (the C++ CPU backend's precision)."""
    pipe.dtype = torch.float32
    for name in ("prompt_encoder", "image_conditioner", "stage", "stage_1", "stage_2", "stage_detailing", "upsampler",
                 "temporal_upsampler", "video_decoder", "audio_decoder"):
        blk = getattr(pipe, name, None)
        if blk is not None and hasattr(blk, "_dtype"):
            blk._dtype = torch.float32  # noqa: SLF001


def install_latent_widths(video_channels: int, audio_channels: int, audio_mel_bins: int) -> None:
    """DiffusionStage builds its latent shapes with the production widths (VideoLatentShape default
    latent_channels=128, AudioLatentShape defaults channels=8, mel_bins=16). Give the two factories
    blocks.py calls the tiny checkpoint's widths instead."""

    class TinyVideoLatentShape(VideoLatentShape):
        __slots__ = ()

        @staticmethod
        def from_pixel_shape(shape, latent_channels=video_channels, **kw):
            return VideoLatentShape.from_pixel_shape(shape, latent_channels=latent_channels, **kw)

    class TinyAudioLatentShape(AudioLatentShape):
        __slots__ = ()

        @staticmethod
        def from_video_pixel_shape(shape, channels=audio_channels, mel_bins=audio_mel_bins, **kw):
            return AudioLatentShape.from_video_pixel_shape(shape, channels=channels, mel_bins=mel_bins, **kw)

    blocks.VideoLatentShape = TinyVideoLatentShape
    blocks.AudioLatentShape = TinyAudioLatentShape


def tiling_desc(cfg) -> object:
    if cfg is None:
        return None
    try:
        import dataclasses

        if dataclasses.is_dataclass(cfg):
            return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    except Exception:  # noqa: BLE001
        pass
    return repr(cfg)


# ------------------------------------------------------------------------------------------------
# Pipelines
# ------------------------------------------------------------------------------------------------


def make_guider(kind: str):
    from ltx_core.components.guiders import MultiModalGuiderParams

    return MultiModalGuiderParams(**guider_params(kind))


# ------------------------------------------------------------------------------------------------
# Pipelines with media inputs: one runner per pipeline, registered in RUNNERS. A runner builds the
# reference pipeline, records its inputs in R and returns (decoded video iterator, decoded Audio).
# ------------------------------------------------------------------------------------------------

KF_IMAGE_SEED = 7011
KF_IMAGES = [  # (pixel frame, strength); frame 0 is a keyframe too in this pipeline
    (0, 1.0),
    (NUM_FRAMES - 1, 0.9),
]
RETAKE_SOURCE_SEED = 7012
RETAKE_WINDOW = (0.1, 0.3)  # seconds: start_time, end_time (the clip lasts NUM_FRAMES / FRAME_RATE = 0.375 s)
RETAKE_AUDIO_RATE = 48000  # the source's audio rate (resampled to the audio encoder's 16 kHz by AudioProcessor)
RETAKE_AUDIO_SECONDS = 0.5  # longer than the clip: the decoder trims it to the clip's duration


def synthetic_rgb(height: int, width: int, frames: int, seed: int) -> torch.Tensor:
    """Deterministic u8 RGB frames [F, H, W, 3]: smooth colour ramps, a square moving right, light noise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.linspace(0.0, 1.0, height).view(height, 1)
    x = torch.linspace(0.0, 1.0, width).view(1, width)
    out = []
    for f in range(frames):
        t = f / max(frames - 1, 1)
        r = 0.5 + 0.4 * torch.sin(6.0 * x + 3.0 * t) * torch.cos(4.0 * y)
        gr = 0.3 + 0.6 * y * (1.0 - 0.5 * t) + 0.0 * x
        b = 0.2 + 0.6 * x * y + 0.2 * t
        img = torch.stack([r.expand(height, width), gr.expand(height, width), b.expand(height, width)], dim=-1)
        x0 = int((width - height // 3) * t)
        img[height // 3 : 2 * height // 3, x0 : x0 + height // 3, :] = torch.tensor([0.9, 0.8, 0.1])
        img = img + 0.03 * torch.randn(img.shape, generator=g)
        out.append((img.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8))
    return torch.stack(out, dim=0)


def run_keyframe_interpolation(mp, paths: dict, size: dict, request: dict):
    """KeyframeInterpolationPipeline: every image (frame 0 included) as guiding keyframe tokens
    (image_conditionings_by_adding_guiding_latent), guided stage 1 at half size, distilled-LoRA stage 2
    that keeps its audio. Images are PNG files written here (crf 0: no H.264 round trip, no PyAV);
    their pixels are recorded as in.image<i>.pixels (u8 [H, W, 3]). The pipeline prepares its images
    in a hard-coded bfloat16 (a local dtype, which force_float32 cannot reach): the image helper is
    called with dtype=float32 instead, like every other block of these runs."""
    import tempfile

    from PIL import Image

    import ltx_pipelines.keyframe_interpolation as kf_mod
    from ltx_pipelines.utils.args import ImageConditioningInput
    from ltx_pipelines.utils.constants import DEFAULT_NEGATIVE_PROMPT

    tmp = Path(tempfile.mkdtemp(prefix="gen_e2e_kf_"))
    pixels = synthetic_rgb(size["height"], size["width"], NUM_FRAMES, KF_IMAGE_SEED)
    images = []
    for i, (frame, strength) in enumerate(KF_IMAGES):
        png = tmp / f"keyframe{i}.png"
        Image.fromarray(pixels[frame].numpy()).save(png)
        images.append(ImageConditioningInput(path=str(png), frame_idx=frame, strength=strength, crf=0))
        R.put(f"in.image{i}.pixels", pixels[frame], f"keyframe image {i} (PNG, lossless): u8 [H, W, 3], frame_idx {frame}, strength {strength}, crf 0")

    orig_cond = kf_mod.image_conditionings_by_adding_guiding_latent
    calls = [0]

    def cond(*args, **kwargs):
        # KeyframeInterpolationPipeline.__call__ prepares its images in a local `dtype = torch.bfloat16`
        # (not self.dtype); float32 here like every other block (the encoder is float32).
        kwargs["dtype"] = torch.float32
        items = orig_cond(*args, **kwargs)
        calls[0] += 1
        for j, item in enumerate(items):
            lat = getattr(item, "keyframes", None)
            if isinstance(lat, torch.Tensor):
                R.put(f"inter.stage{calls[0]}.image{j}.latent", lat, "video encoder output for keyframe image j at this stage's size [1, C, 1, h, w]")
        return items

    kf_mod.image_conditionings_by_adding_guiding_latent = cond
    try:
        lora = LoraPathStrengthAndSDOps(paths["lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
        pipe = kf_mod.KeyframeInterpolationPipeline(
            model_paths=mp, distilled_lora=[lora], spatial_upsampler_path=paths["upsampler"], loras=[], device=CPU
        )
        force_float32(pipe)
        request.update({"class": "ltx_pipelines.keyframe_interpolation.KeyframeInterpolationPipeline",
                        "negative_prompt": DEFAULT_NEGATIVE_PROMPT, "num_inference_steps": GUIDED_STEPS,
                        "video_guider_params": guider_params("video"), "audio_guider_params": guider_params("audio"),
                        "max_batch_size": 1, "spatial_upsampler_path": UPSAMPLER_NAME,
                        "distilled_lora": [{"path": LORA_NAME, "strength": 1.0, "sd_ops": "LTXV_LORA_COMFY_RENAMING_MAP"}], "loras": [],
                        "images": [{"tensor": f"in.image{i}.pixels", "frame_idx": f, "strength": st, "crf": 0} for i, (f, st) in enumerate(KF_IMAGES)],
                        "stage_1_sigmas": "LTX2Scheduler().execute(steps=num_inference_steps) (default)",
                        "stage_2_sigmas": "STAGE_2_DISTILLED_SIGMAS (default)",
                        "image_dtype": "float32 (the pipeline's hard-coded bfloat16 image preparation switched, see run_keyframe_interpolation)"})
        video, audio, _ = pipe(
            prompt=PROMPT, negative_prompt=DEFAULT_NEGATIVE_PROMPT, seed=SEED, height=size["height"], width=size["width"],
            num_frames=NUM_FRAMES, frame_rate=FRAME_RATE, num_inference_steps=GUIDED_STEPS,
            video_guider_params=make_guider("video"), audio_guider_params=make_guider("audio"), images=images,
            vae_dtype=torch.float32, tiling_config=AUTO_TILING, enhance_prompt=False, max_batch_size=1,
        )
        frames = [c for c in video]  # decode inside the patch window
    finally:
        kf_mod.image_conditionings_by_adding_guiding_latent = orig_cond
    return iter(frames), audio


def run_retake(mp, paths: dict, size: dict, request: dict):
    """RetakePipeline as its CLI builds it (distilled=True: DISTILLED_SIGMAS, SimpleDenoiser, one stage at
    the source's size). The source clip is synthetic (no PyAV here): the media readers the reference calls
    are replaced by functions serving the recorded tensors with the readers' own contract —
    get_videostream_metadata -> VideoPixelShape of the clip; decode_video_from_file -> u8 [1, H, W, 3]
    frames with pts time in [start_time, start_time + max_duration); decode_audio_from_file -> Audio
    [1, 2, N] float32 trimmed to round(max_duration * rate) samples from round(start_time * rate).
    Recorded: in.source.frames (u8 [F, H, W, 3], the whole clip), in.source.waveform (the whole audio
    track [1, 2, N] at RETAKE_AUDIO_RATE; absent when torchaudio is stubbed, see below),
    inter.source.video_latent / inter.source.audio_latent (the encoded clip). Without torchaudio the
    reference cannot compute the audio encoder's mel spectrogram, so the clip then has no audio track
    (decode_audio_from_file -> None; the reference then generates audio freely)."""
    import ltx_pipelines.retake as retake_mod
    import ltx_pipelines.utils.helpers as helpers_mod
    from ltx_core.types import Audio, VideoPixelShape

    height, width = size["height"], size["width"]
    frames_u8 = synthetic_rgb(height, width, NUM_FRAMES, RETAKE_SOURCE_SEED)
    R.put("in.source.frames", frames_u8, "the source clip's decoded frames, u8 [F, H, W, 3] RGB, frame i at time i / fps")
    with_audio = "torchaudio" not in STUBBED
    waveform = None
    if with_audio:
        g = torch.Generator().manual_seed(RETAKE_SOURCE_SEED + 1)
        n = int(round(RETAKE_AUDIO_SECONDS * RETAKE_AUDIO_RATE))
        t = torch.arange(n, dtype=torch.float64) / RETAKE_AUDIO_RATE
        left = 0.3 * torch.sin(2 * math.pi * 440.0 * t) + 0.1 * torch.sin(2 * math.pi * 1250.0 * t)
        right = 0.25 * torch.sin(2 * math.pi * 660.0 * t + 0.5)
        waveform = (torch.stack([left, right], dim=0).float() + 0.02 * torch.randn(2, n, generator=g)).clamp(-1, 1).unsqueeze(0)
        R.put("in.source.waveform", waveform, f"the source clip's decoded audio track [1, 2, N] float32 at {RETAKE_AUDIO_RATE} Hz (whole track)")
    src_path = "source_clip.mp4"  # never opened: the readers below serve the recorded tensors

    def metadata(path, fps=None):
        return VideoPixelShape(batch=1, frames=NUM_FRAMES, height=height, width=width, fps=FRAME_RATE)

    def video_fps(path):
        return FRAME_RATE

    def decode_video(path, device, start_time=0.0, max_duration=None):
        end = start_time + max_duration if max_duration is not None else None
        for i in range(NUM_FRAMES):
            ft = i / FRAME_RATE
            if ft < start_time:
                continue
            if end is not None and ft >= end:
                break
            yield frames_u8[i].unsqueeze(0).to(device)

    def decode_audio(path, device, start_time=0.0, max_duration=None):
        if waveform is None:
            return None
        a = waveform[..., int(round(start_time * RETAKE_AUDIO_RATE)):]
        if max_duration is not None:
            a = a[..., : int(round(max_duration * RETAKE_AUDIO_RATE))]
        return Audio(waveform=a.to(device), sampling_rate=RETAKE_AUDIO_RATE)

    orig_vlf, orig_alf = retake_mod.video_latent_from_file, retake_mod.audio_latent_from_file

    def vlf(*args, **kwargs):
        lat = orig_vlf(*args, **kwargs)
        R.put("inter.source.video_latent", lat, "video_latent_from_file: the encoded source clip [1, C, F', H/32, W/32]")
        return lat

    def alf(*args, **kwargs):
        lat = orig_alf(*args, **kwargs)
        if lat is not None:
            R.put("inter.source.audio_latent", lat, "audio_latent_from_file: the encoded source audio [1, C, T, mel]")
        return lat

    with mock.patch.object(retake_mod, "get_videostream_metadata", metadata), \
            mock.patch.object(helpers_mod, "get_videostream_fps", video_fps), \
            mock.patch.object(helpers_mod, "decode_video_from_file", decode_video), \
            mock.patch.object(helpers_mod, "decode_audio_from_file", decode_audio), \
            mock.patch.object(retake_mod, "video_latent_from_file", vlf), \
            mock.patch.object(retake_mod, "audio_latent_from_file", alf):
        pipe = retake_mod.RetakePipeline(model_paths=mp, loras=(), distilled=True, device=CPU)
        force_float32(pipe)
        for name in ("audio_conditioner",):
            blk = getattr(pipe, name, None)
            if blk is not None and hasattr(blk, "_dtype"):
                blk._dtype = torch.float32  # noqa: SLF001
        start, end = RETAKE_WINDOW
        request.update({"class": "ltx_pipelines.retake.RetakePipeline", "distilled": True, "loras": [],
                        "video_path": src_path, "start_time": start, "end_time": end,
                        "height": height, "width": width, "num_frames": NUM_FRAMES, "frame_rate": FRAME_RATE,
                        "source_audio": {"tensor": "in.source.waveform", "sampling_rate": RETAKE_AUDIO_RATE} if with_audio else None,
                        "regenerate_video": True, "regenerate_audio": True, "max_batch_size": 1,
                        "sigmas": "DISTILLED_SIGMAS (default, distilled=True)"})
        video, audio, _ = pipe(
            video_path=src_path, prompt=PROMPT, start_time=start, end_time=end, seed=SEED,
            vae_dtype=torch.float32, tiling_config=AUTO_TILING, enhance_prompt=False, max_batch_size=1,
        )
        frames = [c for c in video]
    return iter(frames), audio


RUNNERS = {
    "keyframe_interpolation": run_keyframe_interpolation,
    "retake": run_retake,
}


# Audio pipelines: text-to-audio (T2AOneStagePipeline) and audio-to-video (A2VidPipelineTwoStage)
# ------------------------------------------------------------------------------------------------

# The a2vid input audio: made here (no PyAV on the generator machine), recorded as in.audio.waveform,
# and handed to the pipeline where its file decoder would (decode_audio_from_file). 22050 Hz stereo
# makes the reference resample (torchaudio, to the audio VAE's 16 kHz) on the way to the encoder;
# start 0.1 s and the CLI's default max duration (num_frames / frame_rate = 0.375 s) are whole or
# non-tie sample counts at that rate (2205 and round(8268.75) = 8269).
A2VID_AUDIO = {"sampling_rate": 22050, "samples": 11025, "channels": 2, "seed": 7011, "start_time": 0.1}


def a2vid_input_waveform() -> torch.Tensor:
    """[2, 11025] float32: two harmonic tones (220 / 330 Hz with a third harmonic) plus a little
    Gaussian noise (seeded); peak below 0.8."""
    sr, n = A2VID_AUDIO["sampling_rate"], A2VID_AUDIO["samples"]
    g = torch.Generator().manual_seed(A2VID_AUDIO["seed"])
    t = torch.arange(n, dtype=torch.float64) / sr
    rows = []
    for c, f in enumerate((220.0, 330.0)):
        x = 0.5 * torch.sin(2 * math.pi * f * t) + 0.2 * torch.sin(2 * math.pi * 3 * f * t + 0.5 * (c + 1))
        rows.append(x + 0.05 * torch.randn(n, generator=g, dtype=torch.float64))
    return torch.stack(rows).float().contiguous()


def decode_recorded_audio(waveform: torch.Tensor, sampling_rate: int, start_time: float, max_duration: float | None):
    """What decode_audio_from_file returns for a lossless stream holding ``waveform`` from time 0:
    the samples from round(start_time * rate), at most round(max_duration * rate) of them, as
    Audio(waveform [1, C, n], rate) (its trim rule; the first decoded frame starts at 0)."""
    from ltx_core.types import Audio

    skip = round(start_time * sampling_rate)
    out = waveform[:, skip:] if skip > 0 else waveform
    if max_duration is not None:
        out = out[:, : round(max_duration * sampling_rate)]
    if out.shape[-1] == 0:
        return None
    return Audio(waveform=out.clone().unsqueeze(0), sampling_rate=sampling_rate)


def run_t2a(paths: dict, size: dict, request: dict):
    """T2AOneStagePipeline as its CLI main() calls it: audio-only transformer, audio CFG guider with
    modality_scale 1.0 (no video), LTX2Scheduler sigmas; returns no video."""
    from ltx_core.components.guiders import MultiModalGuiderParams
    from ltx_pipelines.t2a_one_stage import T2AOneStagePipeline
    from ltx_pipelines.utils.constants import DEFAULT_NEGATIVE_PROMPT
    from ltx_pipelines.utils.model_paths import ModelPaths

    del size
    mp = ModelPaths.from_monolith(paths["checkpoint"], gemma_root=paths["gemma"])
    pipe = T2AOneStagePipeline(model_paths=mp, loras=[], device=CPU)
    force_float32(pipe)
    audio_params = {**guider_params("audio"), "modality_scale": 1.0}
    request.update({"class": "ltx_pipelines.t2a_one_stage.T2AOneStagePipeline", "negative_prompt": DEFAULT_NEGATIVE_PROMPT,
                    "num_inference_steps": GUIDED_STEPS, "audio_guider_params": audio_params, "max_batch_size": 1,
                    "sigmas": "LTX2Scheduler().execute(steps=num_inference_steps) (default)", "loras": [],
                    "duration_predictor": pipe.duration_predictor is not None,
                    "placeholder_pixel_size": 512, "output": "encode_audio(audio, output_path) (WAV); not run here"})
    audio = pipe(
        prompt=PROMPT, negative_prompt=DEFAULT_NEGATIVE_PROMPT, seed=SEED, frame_rate=FRAME_RATE,
        num_inference_steps=GUIDED_STEPS, audio_guider_params=MultiModalGuiderParams(**audio_params),
        num_frames=NUM_FRAMES, enhance_prompt=False, max_batch_size=1,
    )
    request["audio_samples_out"] = int(audio.waveform.shape[-1])
    return None


def run_a2vid(paths: dict, size: dict, request: dict):
    """A2VidPipelineTwoStage as its CLI main() calls it, the input audio handed over where its file
    decoder would return it (decode_audio_from_file replaced, see decode_recorded_audio). Records the
    decoded input, the encoder's log-mel input and the encoded latent (before the pipeline's trim);
    the pipeline returns the decoded input audio itself, recorded as out.audio.waveform."""
    import ltx_pipelines.a2vid_two_stage as a2v

    if "torchaudio" in STUBBED:
        raise RuntimeError("a2vid needs torchaudio: the reference resamples and takes the log-mel with it (AudioProcessor)")
    from ltx_pipelines.utils.constants import DEFAULT_NEGATIVE_PROMPT
    from ltx_pipelines.utils.model_paths import ModelPaths

    wave = a2vid_input_waveform()
    rate = A2VID_AUDIO["sampling_rate"]
    start = A2VID_AUDIO["start_time"]
    max_duration = NUM_FRAMES / FRAME_RATE  # the CLI's default for --audio-max-duration
    R.put("in.audio.waveform", wave, f"the input audio [C, N] float32 at {rate} Hz (a2vid_input_waveform(): the file's samples)")

    def decode_audio(path, device, start_time=0.0, max_duration=None):
        del path
        audio = decode_recorded_audio(wave, rate, start_time, max_duration)
        if audio is not None:
            audio = type(audio)(waveform=audio.waveform.to(device), sampling_rate=audio.sampling_rate)
            R.put("inter.audio.decoded_waveform", audio.waveform, "decode_audio_from_file(...).waveform [1, C, n]: the input from "
                  "round(start_time * rate), round(max_duration * rate) samples")
        return audio

    orig_encode = a2v.vae_encode_audio
    orig_decode = a2v.decode_audio_from_file

    def encode_audio(audio, audio_encoder, audio_processor=None):
        cap = {}

        def keep_mel(_m, inputs):  # returns None: the input goes on unchanged
            cap.setdefault("mel", inputs[0].detach().clone())

        h = audio_encoder.register_forward_pre_hook(keep_mel)
        try:
            latent = orig_encode(audio, audio_encoder, audio_processor)
        finally:
            h.remove()
        R.put("inter.audio.encoder_mel", cap["mel"], "AudioProcessor.waveform_to_mel(resampled input) [1, C, T_mel, mel_bins]: the "
              "audio encoder's input")
        R.put("inter.audio.encoded_latent", latent, "encode_audio(decoded input, encoder) [1, C, T, mel] before the pipeline's "
              "trim to AudioLatentShape.from_duration(num_frames / frame_rate).frames")
        return latent

    a2v.decode_audio_from_file = decode_audio
    a2v.vae_encode_audio = encode_audio
    try:
        mp = ModelPaths.from_monolith(paths["checkpoint"], gemma_root=paths["gemma"])
        lora = LoraPathStrengthAndSDOps(paths["lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
        pipe = a2v.A2VidPipelineTwoStage(model_paths=mp, distilled_lora=[lora], spatial_upsampler_path=paths["upsampler"], loras=[],
                                         device=CPU)
        force_float32(pipe)
        pipe.audio_conditioner._dtype = torch.float32  # noqa: SLF001
        request.update({"class": "ltx_pipelines.a2vid_two_stage.A2VidPipelineTwoStage", "negative_prompt": DEFAULT_NEGATIVE_PROMPT,
                        "num_inference_steps": GUIDED_STEPS, "video_guider_params": guider_params("video"),
                        "audio_guider_params": "MultiModalGuiderParams() (stage 1, audio frozen)", "max_batch_size": 1,
                        "spatial_upsampler_path": UPSAMPLER_NAME,
                        "distilled_lora": [{"path": LORA_NAME, "strength": 1.0, "sd_ops": "LTXV_LORA_COMFY_RENAMING_MAP"}], "loras": [],
                        "stage_1_sigmas": "LTX2Scheduler().execute(steps=num_inference_steps) (default)",
                        "stage_2_sigmas": "STAGE_2_DISTILLED_SIGMAS (default)",
                        "audio_path": "<in.audio.waveform>", "audio_sampling_rate_in": rate, "audio_start_time": start,
                        "audio_max_duration": max_duration,
                        "audio_decode": "decode_audio_from_file replaced by decode_recorded_audio (no PyAV): samples "
                        "[round(start * rate), + round(max_duration * rate)) of in.audio.waveform"})
        video, audio, _ = pipe(
            prompt=PROMPT, negative_prompt=DEFAULT_NEGATIVE_PROMPT, seed=SEED, height=size["height"], width=size["width"],
            num_frames=NUM_FRAMES, frame_rate=FRAME_RATE, num_inference_steps=GUIDED_STEPS, video_guider_params=make_guider("video"),
            images=[], audio_path="<in.audio.waveform>", audio_start_time=start, audio_max_duration=max_duration,
            vae_dtype=torch.float32, tiling_config=AUTO_TILING, enhance_prompt=False, max_batch_size=1,
        )
        frames = [c.detach().float().cpu() for c in video]
    finally:
        a2v.decode_audio_from_file = orig_decode
        a2v.vae_encode_audio = orig_encode
    R.put("out.audio.waveform", audio.waveform.float(), "the pipeline's returned Audio.waveform [C, n]: the decoded input audio "
          "(what the CLI muxes into the MP4)")
    R.audio_rate = int(audio.sampling_rate)
    request["audio_samples_out"] = int(audio.waveform.shape[-1])
    return frames


# Pipelines run by their own runner function: name -> runner(paths, size, request) -> decoded video
# chunks (or None for audio-only pipelines).
PIPELINE_RUNNERS = {
    "t2a": run_t2a,
    "a2vid": run_a2vid,
}


def run_pipeline(name: str, paths: dict) -> dict:
    from ltx_pipelines.utils.constants import DEFAULT_NEGATIVE_PROMPT
    from ltx_pipelines.utils.model_paths import ModelPaths

    R.reset()
    size = PIPELINES[name]
    mp = ModelPaths.from_monolith(paths["checkpoint"], gemma_root=paths["gemma"])
    request: dict = {
        "pipeline": name,
        "prompt": PROMPT,
        "seed": SEED,
        "height": size["height"],
        "width": size["width"],
        "num_frames": NUM_FRAMES,
        "frame_rate": FRAME_RATE,
        "images": [],
        "enhance_prompt": False,
        "tiling_config": "AUTO_TILING",
        "vae_dtype": "float32",
        "device": "cpu",
        "model_paths": f"ModelPaths.from_monolith({CKPT_NAME!r}, gemma_root={Path(paths['gemma']).name!r})",
    }
    t0 = time.time()
    video = None
    with torch.inference_mode():
        runner = RUNNERS.get(name)
        if runner is not None:
            video, audio = runner(mp, paths, size, request)
        elif name in PIPELINE_RUNNERS:
            video = PIPELINE_RUNNERS[name](paths, size, request)
        elif name == "distilled":
            from ltx_pipelines.distilled import DistilledPipeline

            pipe = DistilledPipeline(model_paths=mp, spatial_upsampler_path=paths["upsampler"], loras=[], device=CPU)
            force_float32(pipe)
            request.update({"class": "ltx_pipelines.distilled.DistilledPipeline", "spatial_upsampler_path": UPSAMPLER_NAME, "loras": [],
                            "stage_1_sigmas": "DISTILLED_SIGMAS (default)", "stage_2_sigmas": "STAGE_2_DISTILLED_SIGMAS (default)",
                            "ancestral_stage_1": bool(pipe.use_ancestral_sampler)})
            video, audio, _, _ = pipe(
                prompt=PROMPT, seed=SEED, height=size["height"], width=size["width"], frame_rate=FRAME_RATE, images=[],
                num_frames=NUM_FRAMES, vae_dtype=torch.float32, tiling_config=AUTO_TILING, enhance_prompt=False,
            )
        elif name == "one_stage":
            from ltx_pipelines.ti2vid_one_stage import TI2VidOneStagePipeline

            pipe = TI2VidOneStagePipeline(model_paths=mp, loras=[], device=CPU)
            force_float32(pipe)
            request.update({"class": "ltx_pipelines.ti2vid_one_stage.TI2VidOneStagePipeline", "negative_prompt": DEFAULT_NEGATIVE_PROMPT,
                            "num_inference_steps": GUIDED_STEPS, "video_guider_params": guider_params("video"),
                            "audio_guider_params": guider_params("audio"), "max_batch_size": 1, "sigmas": "LTX2Scheduler().execute(steps=num_inference_steps) (default)", "loras": []})
            video, audio, _ = pipe(
                prompt=PROMPT, negative_prompt=DEFAULT_NEGATIVE_PROMPT, seed=SEED, height=size["height"], width=size["width"],
                frame_rate=FRAME_RATE, num_inference_steps=GUIDED_STEPS, video_guider_params=make_guider("video"),
                audio_guider_params=make_guider("audio"), images=[], num_frames=NUM_FRAMES, vae_dtype=torch.float32,
                tiling_config=AUTO_TILING, enhance_prompt=False,
            )
        elif name == "two_stage":
            from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline

            lora = LoraPathStrengthAndSDOps(paths["lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
            pipe = TI2VidTwoStagesPipeline(model_paths=mp, distilled_lora=[lora], spatial_upsampler_path=paths["upsampler"], loras=[], device=CPU)
            force_float32(pipe)
            request.update({"class": "ltx_pipelines.ti2vid_two_stages.TI2VidTwoStagesPipeline", "negative_prompt": DEFAULT_NEGATIVE_PROMPT,
                            "num_inference_steps": GUIDED_STEPS, "video_guider_params": guider_params("video"),
                            "audio_guider_params": guider_params("audio"), "max_batch_size": 1,
                            "spatial_upsampler_path": UPSAMPLER_NAME,
                            "distilled_lora": [{"path": LORA_NAME, "strength": 1.0, "sd_ops": "LTXV_LORA_COMFY_RENAMING_MAP"}], "loras": [],
                            "stage_1_sigmas": "LTX2Scheduler().execute(steps=num_inference_steps) (default)",
                            "stage_2_sigmas": "STAGE_2_DISTILLED_SIGMAS (default)"})
            video, audio, _, _ = pipe(
                prompt=PROMPT, negative_prompt=DEFAULT_NEGATIVE_PROMPT, seed=SEED, height=size["height"], width=size["width"],
                frame_rate=FRAME_RATE, num_inference_steps=GUIDED_STEPS, video_guider_params=make_guider("video"),
                audio_guider_params=make_guider("audio"), images=[], num_frames=NUM_FRAMES, vae_dtype=torch.float32,
                tiling_config=AUTO_TILING, enhance_prompt=False,
            )
        elif name == "two_stage_hq":
            import functools

            import ltx_pipelines.ti2vid_two_stages_hq as hq
            from ltx_core.components.guiders import MultiModalGuiderParams
            from ltx_pipelines.utils.samplers import res2s_audio_video_denoising_loop

            # float32 everywhere: the res_2s loop's own model_dtype defaults to bfloat16.
            res2s_f32 = functools.partial(res2s_audio_video_denoising_loop, model_dtype=torch.float32)
            res2s_f32.__name__ = "res2s_audio_video_denoising_loop"  # type: ignore[attr-defined]
            hq.res2s_audio_video_denoising_loop = res2s_f32
            lora = LoraPathStrengthAndSDOps(paths["lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
            pipe = hq.TI2VidTwoStagesHQPipeline(
                model_paths=mp, distilled_lora=[lora], distilled_lora_strength_stage_1=HQ_LORA_STRENGTHS[0],
                distilled_lora_strength_stage_2=HQ_LORA_STRENGTHS[1], spatial_upsampler_path=paths["upsampler"], loras=(), device=CPU,
            )
            force_float32(pipe)
            request.update({"class": "ltx_pipelines.ti2vid_two_stages_hq.TI2VidTwoStagesHQPipeline", "negative_prompt": DEFAULT_NEGATIVE_PROMPT,
                            "num_inference_steps": GUIDED_STEPS, "video_guider_params": HQ_GUIDERS["video"],
                            "audio_guider_params": HQ_GUIDERS["audio"], "max_batch_size": 1,
                            "spatial_upsampler_path": UPSAMPLER_NAME,
                            "distilled_lora": [{"path": LORA_NAME, "strength_stage_1": HQ_LORA_STRENGTHS[0],
                                                "strength_stage_2": HQ_LORA_STRENGTHS[1], "sd_ops": "LTXV_LORA_COMFY_RENAMING_MAP"}], "loras": [],
                            "stage_1_sigmas": "LTX2Scheduler().execute(latent=<stage-1 latent>, steps=num_inference_steps) (default)",
                            "stage_2_sigmas": "STAGE_2_DISTILLED_SIGMAS (default)",
                            "res2s": "res2s_audio_video_denoising_loop defaults (noise_seed -1, substep seed 9999, eta 0.5, bongmath, legacy) "
                            "with model_dtype float32; its generators are CPU generators, draws not recorded"})
            video, audio, _, _ = pipe(
                prompt=PROMPT, negative_prompt=DEFAULT_NEGATIVE_PROMPT, seed=SEED, height=size["height"], width=size["width"],
                frame_rate=FRAME_RATE, num_inference_steps=GUIDED_STEPS, video_guider_params=MultiModalGuiderParams(**HQ_GUIDERS["video"]),
                audio_guider_params=MultiModalGuiderParams(**HQ_GUIDERS["audio"]), images=[], num_frames=NUM_FRAMES,
                vae_dtype=torch.float32, tiling_config=AUTO_TILING, enhance_prompt=False,
            )
        elif name == "dfr":
            import functools

            import ltx_pipelines.dfr_pipeline as dfr_mod
            from ltx_pipelines.utils.samplers import euler_ancestral_denoising_loop

            # float32 everywhere: the temporal rounds' ancestral loop defaults to model_dtype bfloat16.
            anc_f32 = functools.partial(euler_ancestral_denoising_loop, model_dtype=torch.float32)
            anc_f32.__name__ = "euler_ancestral_denoising_loop"  # type: ignore[attr-defined]
            dfr_mod.euler_ancestral_denoising_loop = anc_f32
            mp_kf = ModelPaths.from_monolith(paths["kf_checkpoint"], gemma_root=paths["gemma"])
            detailing = LoraPathStrengthAndSDOps(paths["lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
            pipe = dfr_mod.DFRPipeline(
                model_paths=mp_kf, distilled_lora=[], spatial_upsampler_path=paths["upsampler"], loras=[],
                detailing_lora=[detailing], temporal_upsampler_path=paths["temporal_upsampler"], device=CPU,
            )
            force_float32(pipe)
            request.update({"class": "ltx_pipelines.dfr_pipeline.DFRPipeline",
                            "model_paths": f"ModelPaths.from_monolith({KF_CKPT_NAME!r}, gemma_root={Path(paths['gemma']).name!r})",
                            "spatial_upsampler_path": UPSAMPLER_NAME, "temporal_upsampler_path": TEMPORAL_UPSAMPLER_NAME,
                            "distilled_lora": [], "loras": [],
                            "detailing_lora": [{"path": LORA_NAME, "strength": 1.0, "sd_ops": "LTXV_LORA_COMFY_RENAMING_MAP"}],
                            "detailing_downscale_factor": pipe._detailing_downscale,  # noqa: SLF001
                            "temporal_upsample_rounds": DFR_ROUNDS,
                            "stage_1_sigmas": "DISTILLED_SIGMAS (default)", "stage_2_sigmas": "STAGE_2_DISTILLED_SIGMAS (default)",
                            "ancestral_loop": "euler_ancestral_denoising_loop with model_dtype float32 (temporal rounds)"})
            R.put("in.keyframes_abs_pos_embedding", paths["kf_embedding"].float(),
                  f"model.diffusion_model.keyframes_abs_pos_embedding of {KF_CKPT_NAME} (= {CKPT_NAME} + this tensor + "
                  "config.transformer.use_keyframes_abs_pos_embedding = true)")
            video, audio, n_out, _ = pipe(
                prompt=PROMPT, seed=SEED, height=size["height"], width=size["width"], frame_rate=FRAME_RATE, images=[],
                num_frames=NUM_FRAMES, temporal_upsample_rounds=DFR_ROUNDS, tiling_config=AUTO_TILING, enhance_prompt=False,
            )
            request["num_frames_out"] = n_out
            request["frame_rate_out"] = FRAME_RATE * 2**DFR_ROUNDS
            request["audio_samples_out"] = int(audio.waveform.shape[-1])
        else:
            raise ValueError(name)
        if name == "dfr":
            # Size: the decoders have their own fixtures; keep the latents only.
            for k in ("out.audio.waveform", "out.audio.mel"):
                R.t.pop(k, None)
            frames = None
        elif video is None:
            frames = None  # audio-only pipeline
        else:
            frames = torch.cat([c.detach().float().cpu() for c in video], dim=0)
    if frames is not None:
        R.put("out.video.frames", frames.to(torch.float16), "torch.cat(list(decoded video iterator)) [F, H, W, 3] in [0, 1], stored as float16")
    request["tiling_config_resolved"] = tiling_desc(R.tiling)
    request["audio_sampling_rate"] = R.audio_rate
    log(f"  {name}: {time.time() - t0:.1f} s, frames {list(frames.shape) if frames is not None else 'not decoded'}, "
        f"audio latent {list(R.t['out.audio.latent'].shape) if 'out.audio.latent' in R.t else None} @ {R.audio_rate} Hz")
    return request


# ------------------------------------------------------------------------------------------------
# IC-LoRA (ltx_pipelines.ic_lora.ICLoraPipeline + iclora_utils)
# ------------------------------------------------------------------------------------------------

IC_LORA_NAME = "e2e/ltx23_tiny_ic_lora.safetensors"
# The e2e LoRA's tensors with IC-LoRA metadata: a union-control style reference at half the
# stage-1 size (no temporal subsampling).
IC_LORA_METADATA = {"format": "pt", "reference_downscale_factor": "2"}
IC_SEEDS = {"video": 7011, "mask": 7012}
# The conditioning clip: more frames than the request (the decoder stops at num_frames) and an aspect
# ratio unlike the reference size (resize_and_center_crop crops the width).
IC_VIDEO_SHAPE = (12, 48, 30)  # frames, height, width
IC_VIDEO_PATH = "synthetic_conditioning_clip.mp4"  # never opened: the decoder is replaced (no PyAV)
IC_RUNS = {
    # video-conditioning strength, --conditioning-attention-mask strength (None: no mask), skip stage 2
    "ic_lora": {"strength": 1.0, "mask_strength": None, "skip_stage_2": False},
    "ic_lora_mask": {"strength": 0.8, "mask_strength": 0.5, "skip_stage_2": True},
}


def ic_video_frames() -> torch.Tensor:
    """u8 [F, H, W, 3]: a smooth moving colour pattern plus seeded noise (deterministic)."""
    f, h, w = IC_VIDEO_SHAPE
    g = torch.Generator().manual_seed(IC_SEEDS["video"])
    t = torch.arange(f, dtype=torch.float32)[:, None, None, None]
    y = torch.arange(h, dtype=torch.float32)[None, :, None, None]
    x = torch.arange(w, dtype=torch.float32)[None, None, :, None]
    c = torch.arange(3, dtype=torch.float32)[None, None, None, :]
    base = 127.5 + 90.0 * torch.sin(0.21 * x + 0.13 * y + 0.4 * t + 2.1 * c)
    noise = 25.0 * torch.randn(f, h, w, 3, generator=g)
    return (base + noise).round().clamp(0, 255).to(torch.uint8)


def ic_mask(num_frames: int, height: int, width: int) -> torch.Tensor:
    """float32 [1, 1, F, H, W] in [0, 1] at the stage-1 size, as ic_lora._load_mask_video returns."""
    g = torch.Generator().manual_seed(IC_SEEDS["mask"])
    return torch.rand(1, 1, num_frames, height, width, generator=g)


def write_ic_lora(out: Path, lora: dict) -> Path:
    path = out / IC_LORA_NAME
    write_safetensors(path, lora, IC_LORA_METADATA)
    return path


def run_ic_lora(mp, paths: dict, size: dict, request: dict):
    """ICLoraPipeline on the synthetic clip; the clip's frames come from a replaced
    iclora_utils.decode_video_by_frame (the reference's own video_preprocess, encoder and
    conditioning items do the rest)."""
    import ltx_pipelines.iclora_utils as icu
    from ltx_pipelines.ic_lora import ICLoraPipeline

    run = IC_RUNS[request["pipeline"]]
    clip = ic_video_frames()
    R.put("in.video_conditioning.frames", clip, f"the conditioning clip, u8 [F, H, W, 3] (decode_video_by_frame's frames; path {IC_VIDEO_PATH!r})")

    def decode_by_frame(path, device, starting_frame=0, frame_cap=None):
        n = clip.shape[0] if frame_cap is None else min(frame_cap, clip.shape[0])
        for i in range(starting_frame, n):
            yield clip[i : i + 1].to(device)

    orig = {k: getattr(icu, k) for k in ("decode_video_by_frame", "video_preprocess", "VideoConditionByReferenceLatent", "downsample_mask_video_to_latent")}

    def video_preprocess(frames, height, width, dtype, device):
        out = orig["video_preprocess"](frames, height, width, dtype, device)
        R.put("inter.ic_lora.reference_pixels", out, f"video_preprocess(...) [1, 3, F, {height}, {width}] in [-1, 1], the video encoder's input")
        return out

    def reference_latent(latent, downscale_factor=1, temporal_scale_factor=1, strength=1.0):
        R.put("inter.ic_lora.reference_latent", latent, "VideoConditionByReferenceLatent.latent: the encoded reference [1, C, F, h, w]")
        R.calls["inter.ic_lora.reference"] = json.dumps({"downscale_factor": downscale_factor, "temporal_scale_factor": temporal_scale_factor, "strength": strength})
        return orig["VideoConditionByReferenceLatent"](latent, downscale_factor=downscale_factor, temporal_scale_factor=temporal_scale_factor, strength=strength)

    def downsample_mask(mask, target_latent_shape):
        out = orig["downsample_mask_video_to_latent"](mask, target_latent_shape)
        R.put("inter.ic_lora.latent_mask", out, "downsample_mask_video_to_latent(mask, reference latent shape) [B, F*h*w] (before * strength)")
        return out

    mask = None
    stage1_h, stage1_w = size["height"] // 2, size["width"] // 2
    if run["mask_strength"] is not None:
        mask = ic_mask(NUM_FRAMES, stage1_h, stage1_w)
        R.put("in.conditioning_attention_mask", mask, "conditioning_attention_mask [1, 1, num_frames, height / 2, width / 2] float32 in [0, 1] "
              "(what ic_lora._load_mask_video returns for a mask clip; seeded torch.rand)")
    lora = LoraPathStrengthAndSDOps(paths["ic_lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
    icu.decode_video_by_frame = decode_by_frame
    icu.video_preprocess = video_preprocess
    icu.VideoConditionByReferenceLatent = reference_latent
    icu.downsample_mask_video_to_latent = downsample_mask
    try:
        pipe = ICLoraPipeline(model_paths=mp, spatial_upsampler_path=paths["upsampler"], loras=[lora], device=CPU)
        force_float32(pipe)
        request.update({
            "class": "ltx_pipelines.ic_lora.ICLoraPipeline", "spatial_upsampler_path": UPSAMPLER_NAME,
            "loras": [{"path": IC_LORA_NAME, "strength": 1.0, "sd_ops": "LTXV_LORA_COMFY_RENAMING_MAP", "metadata": IC_LORA_METADATA}],
            "reference_downscale_factor": pipe.reference_downscale_factor,
            "reference_temporal_scale_factor": pipe.reference_temporal_scale_factor,
            "video_conditioning": [[IC_VIDEO_PATH, run["strength"]]],
            "video_conditioning_frames": list(IC_VIDEO_SHAPE),
            "conditioning_attention_strength": 1.0 if run["mask_strength"] is None else run["mask_strength"],
            "conditioning_attention_mask": mask is not None,
            "skip_stage_2": run["skip_stage_2"],
            "stage_1_sigmas": "DISTILLED_SIGMAS (default)", "stage_2_sigmas": "STAGE_2_DISTILLED_SIGMAS (default)",
        })
        video, audio, _ = pipe(
            prompt=PROMPT, seed=SEED, height=size["height"], width=size["width"], num_frames=NUM_FRAMES, frame_rate=FRAME_RATE,
            images=[], video_conditioning=[(IC_VIDEO_PATH, run["strength"])], enhance_prompt=False, vae_dtype=torch.float32,
            tiling_config=AUTO_TILING, conditioning_attention_strength=request["conditioning_attention_strength"],
            skip_stage_2=run["skip_stage_2"], conditioning_attention_mask=mask,
        )
        # The decoded video is a lazy iterator that still runs the decoder: materialise it here.
        video = [c.detach().float().cpu() for c in video]
    finally:
        for k, v in orig.items():
            setattr(icu, k, v)
    return video, audio


# Pipelines with their own runner: name -> fn(model_paths, paths, size, request) -> (video chunks, audio).
RUNNERS.update({
    "ic_lora": run_ic_lora,
    "ic_lora_mask": run_ic_lora,
})


# ------------------------------------------------------------------------------------------------
# DubIt (ltx_pipelines.dubit.DubItPipeline)
# ------------------------------------------------------------------------------------------------

# The reference clip (video + audio track), made here (no PyAV): more frames than the 8k + 1 grid
# (the pipeline snaps 11 down to 9), an aspect ratio unlike the output's (the reference video is
# resized and center-cropped), and a stereo track at 48 kHz longer than the clip (the pipeline
# encodes the whole track as the audio reference; AudioProcessor resamples it to 16 kHz).
DUBIT_CLIP = {"frames": 11, "height": 48, "width": 30, "fps": FRAME_RATE, "seed": 7013,
              "audio_rate": 48000, "audio_seconds": 0.5, "audio_seed": 7014}
DUBIT_REFERENCE_PATH = "synthetic_dubit_reference.mp4"  # never opened: the readers are replaced
DUBIT_REFERENCE_STRENGTH = 1.0  # the CLI's --reference-strength default


def dubit_reference_waveform() -> torch.Tensor:
    """[1, 2, N] float32 at DUBIT_CLIP['audio_rate']: a voice-like pair of tones with a slow
    amplitude envelope per channel plus a little seeded noise; peak below 0.8."""
    sr = DUBIT_CLIP["audio_rate"]
    n = int(round(DUBIT_CLIP["audio_seconds"] * sr))
    g = torch.Generator().manual_seed(DUBIT_CLIP["audio_seed"])
    t = torch.arange(n, dtype=torch.float64) / sr
    env = 0.5 + 0.5 * torch.sin(2 * math.pi * 3.0 * t)
    left = env * (0.4 * torch.sin(2 * math.pi * 180.0 * t) + 0.15 * torch.sin(2 * math.pi * 540.0 * t))
    right = env * (0.35 * torch.sin(2 * math.pi * 240.0 * t + 0.3) + 0.1 * torch.sin(2 * math.pi * 960.0 * t))
    wave = torch.stack([left, right], dim=0) + 0.02 * torch.randn(2, n, generator=g, dtype=torch.float64)
    return wave.float().clamp(-1.0, 1.0).unsqueeze(0).contiguous()


def run_dubit(mp, paths: dict, size: dict, request: dict):
    """DubItPipeline as its CLI main() calls it (images=[], the IC-LoRA e2e/ltx23_tiny_ic_lora.safetensors
    at strength 1 fused for both stages, reference_downscale_factor 2 from its metadata). The reference
    clip's readers are replaced by functions serving the recorded tensors with the readers' contract:
    dubit.get_videostream_metadata -> VideoPixelShape(frames 11, fps 24) of the clip;
    iclora_utils.decode_video_by_frame -> u8 [1, H, W, 3] frames up to frame_cap; dubit.decode_audio_from_file
    -> Audio([1, 2, N] float32, 48000), the whole track. The reference's own video_preprocess, tiled video
    encode (TileSizeConfig.default(): one tile here), audio encode and patchify_dubit_audio_reference_latent
    do the rest. Recorded: in.reference.frames, in.reference.waveform; per build (call 0 stage 1, call 1
    stage 2) inter.dubit.reference_pixels<n> / reference_latent<n>; the encoded reference audio
    (inter.dubit.audio_reference_latent) and each patchified audio reference with its positions
    (inter.dubit.audio_reference<n>.tokens / .positions: call 0 the clip's track, call 1 the stage-1 audio)."""
    import ltx_pipelines.dubit as dubit_mod
    import ltx_pipelines.iclora_utils as icu
    from ltx_core.types import Audio, VideoPixelShape

    if "torchaudio" in STUBBED:
        raise RuntimeError("dubit needs torchaudio: the reference resamples and takes the log-mel of the reference audio with it")
    clip = synthetic_rgb(DUBIT_CLIP["height"], DUBIT_CLIP["width"], DUBIT_CLIP["frames"], DUBIT_CLIP["seed"])
    wave = dubit_reference_waveform()
    rate = DUBIT_CLIP["audio_rate"]
    R.put("in.reference.frames", clip, f"the reference clip's decoded frames, u8 [F, H, W, 3] RGB at {DUBIT_CLIP['fps']} fps "
          f"(path {DUBIT_REFERENCE_PATH!r})")
    R.put("in.reference.waveform", wave, f"the reference clip's decoded audio track [1, 2, N] float32 at {rate} Hz (whole track)")

    def metadata(path, fps=None):
        del path, fps
        return VideoPixelShape(batch=1, frames=DUBIT_CLIP["frames"], height=DUBIT_CLIP["height"], width=DUBIT_CLIP["width"],
                               fps=DUBIT_CLIP["fps"])

    def decode_by_frame(path, device, starting_frame=0, frame_cap=None):
        del path
        n = clip.shape[0] if frame_cap is None else min(frame_cap, clip.shape[0])
        for i in range(starting_frame, n):
            yield clip[i : i + 1].to(device)

    def decode_audio(path, device, start_time=0.0, max_duration=None):
        del path
        a = wave[..., int(round(start_time * rate)):]
        if max_duration is not None:
            a = a[..., : int(round(max_duration * rate))]
        return Audio(waveform=a.clone().to(device), sampling_rate=rate)

    orig_icu = {k: getattr(icu, k) for k in ("decode_video_by_frame", "video_preprocess", "VideoConditionByReferenceLatent")}
    orig_dub = {k: getattr(dubit_mod, k) for k in ("get_videostream_metadata", "decode_audio_from_file", "vae_encode_audio",
                                                     "patchify_dubit_audio_reference_latent")}
    counts = {"pixels": 0, "latent": 0, "audio_ref": 0}

    def video_preprocess(frames, height, width, dtype, device):
        out = orig_icu["video_preprocess"](frames, height, width, dtype, device)
        R.put(f"inter.dubit.reference_pixels{counts['pixels']}", out,
              f"video_preprocess(...) [1, 3, F, {height}, {width}] in [-1, 1], the video encoder's input (0: stage 1, 1: stage 2)")
        counts["pixels"] += 1
        return out

    def reference_latent(latent, downscale_factor=1, temporal_scale_factor=1, strength=1.0):
        n = counts["latent"]
        counts["latent"] += 1
        R.put(f"inter.dubit.reference_latent{n}", latent, "VideoConditionByReferenceLatent.latent: the tiled-encoded reference "
              "[1, C, F, h, w] (0: stage 1, 1: stage 2)")
        R.calls[f"inter.dubit.reference{n}"] = json.dumps({"downscale_factor": downscale_factor,
                                                           "temporal_scale_factor": temporal_scale_factor, "strength": strength})
        return orig_icu["VideoConditionByReferenceLatent"](latent, downscale_factor=downscale_factor,
                                                           temporal_scale_factor=temporal_scale_factor, strength=strength)

    def encode_audio(audio, audio_encoder, audio_processor=None):
        cap = {}

        def keep_mel(_m, inputs):  # returns None: the input goes on unchanged
            cap.setdefault("mel", inputs[0].detach().clone())

        h = audio_encoder.register_forward_pre_hook(keep_mel)
        try:
            latent = orig_dub["vae_encode_audio"](audio, audio_encoder, audio_processor)
        finally:
            h.remove()
        R.put("inter.dubit.audio_reference_mel", cap["mel"], "AudioProcessor.waveform_to_mel(resampled reference track) "
              "[1, C, T_mel, mel_bins]: the audio encoder's input")
        R.put("inter.dubit.audio_reference_latent", latent, "encode_audio(reference track, encoder) [1, C, T_ref, mel]: the "
              "stage-1 audio reference (whole track, no trim)")
        return latent

    def patchify_reference(vae_latents, *, negative_positions, device):
        tokens, positions = orig_dub["patchify_dubit_audio_reference_latent"](vae_latents, negative_positions=negative_positions,
                                                                              device=device)
        n = counts["audio_ref"]
        counts["audio_ref"] += 1
        R.put(f"inter.dubit.audio_reference{n}.tokens", tokens, "patchify_dubit_audio_reference_latent tokens [1, T_ref, C * mel] "
              "(0: the clip's encoded track, stage 1; 1: the stage-1 audio latent, stage 2)")
        R.put(f"inter.dubit.audio_reference{n}.positions", positions, "its positions [1, 1, T_ref, 2] in seconds, shifted by "
              "-(last end time) - 0.04 (negative_positions=True)")
        return tokens, positions

    icu.decode_video_by_frame = decode_by_frame
    icu.video_preprocess = video_preprocess
    icu.VideoConditionByReferenceLatent = reference_latent
    dubit_mod.get_videostream_metadata = metadata
    dubit_mod.decode_audio_from_file = decode_audio
    dubit_mod.vae_encode_audio = encode_audio
    dubit_mod.patchify_dubit_audio_reference_latent = patchify_reference
    try:
        lora = LoraPathStrengthAndSDOps(paths["ic_lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
        pipe = dubit_mod.DubItPipeline(model_paths=mp, spatial_upsampler_path=paths["upsampler"], ic_lora=lora, device=CPU)
        force_float32(pipe)
        pipe.audio_conditioner._dtype = torch.float32  # noqa: SLF001
        from ltx_pipelines.utils.helpers import snap_frames_to_grid

        num_frames = snap_frames_to_grid(DUBIT_CLIP["frames"])
        request.update({
            "class": "ltx_pipelines.dubit.DubItPipeline", "spatial_upsampler_path": UPSAMPLER_NAME,
            "ic_lora": {"path": IC_LORA_NAME, "strength": 1.0, "sd_ops": "LTXV_LORA_COMFY_RENAMING_MAP", "metadata": IC_LORA_METADATA},
            "reference_downscale_factor": pipe.reference_downscale_factor,
            "reference_video": DUBIT_REFERENCE_PATH, "reference_strength": DUBIT_REFERENCE_STRENGTH,
            "reference_frames": DUBIT_CLIP["frames"], "reference_size": [DUBIT_CLIP["height"], DUBIT_CLIP["width"]],
            "reference_audio": {"tensor": "in.reference.waveform", "sampling_rate": rate},
            "num_frames": num_frames, "frame_rate": DUBIT_CLIP["fps"],
            "encode_tiling": "TileSizeConfig.default() (one tile at these sizes)",
            "stage_1_sigmas": "DISTILLED_SIGMAS (default)", "stage_2_sigmas": "STAGE_2_DISTILLED_SIGMAS (default)",
        })
        video, audio, _ = pipe(
            prompt=PROMPT, seed=SEED, height=size["height"], width=size["width"], images=[],
            reference_video_path=DUBIT_REFERENCE_PATH, reference_strength=DUBIT_REFERENCE_STRENGTH, enhance_prompt=False,
            vae_dtype=torch.float32, tiling_config=AUTO_TILING,
        )
        # The decoded video is a lazy iterator that still runs the decoder: materialise it here.
        video = [c.detach().float().cpu() for c in video]
    finally:
        for k, v in orig_icu.items():
            setattr(icu, k, v)
        for k, v in orig_dub.items():
            setattr(dubit_mod, k, v)
    return video, audio


RUNNERS.update({
    "dubit": run_dubit,
})


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------

NOTES = {
    "precision": "float32 compute everywhere (the pipelines' hard-coded bfloat16 replaced after construction: every block's _dtype = "
    "float32, the transformer built with dtype=float32, vae_dtype=float32). Weights are bf16 in the files and cast exactly. "
    "Noise is drawn as float32 (the latent dtype), so it is torch.randn float32 from the CPU generator.",
    "latent_widths": "DiffusionStage's VideoLatentShape.from_pixel_shape / AudioLatentShape.from_video_pixel_shape are given the "
    "checkpoint's widths: video latent channels = config.transformer.in_channels (16), audio = audio_in_channels / 16 channels "
    "(2) x 16 mel bins (production: 128 and 8 x 16, the reference's defaults).",
    "noise": "one torch.Generator(device='cpu').manual_seed(seed) per pipeline call (GaussianNoiser); draws in order: stage-1 video "
    "[1, T_v1, C], stage-1 audio [1, T_a, C_a], then (two-stage pipelines) stage-2 video [1, T_v2, C] and stage-2 audio "
    "[1, T_a, C_a] (TI2VidTwoStagesPipeline draws and uses the stage-2 audio noise but discards the stage-2 audio result). "
    "Stage 2: latent = lerp(clean, noise, sigma_0) with clean = the patchified upsampled video / stage-1 audio. in.noise.* in "
    "each io file lists them (metadata noise_order).",
    "denoising": "euler_denoising_loop + EulerDiffusionStep in every stage (LTX-2.3 is below the 2.5 ancestral threshold). "
    "Per step: denoiser(transformer, states, sigmas, i) -> denoised (inter.stageS.stepI.*_denoised); the loop blends it with "
    "the clean latent by the denoise mask (all ones here) and steps (EulerDiffusionStep) x <- x + v * (sigma_{i+1} - sigma_i) "
    "with v = (x - denoised) / sigma_i (float32; sigma_i as a Python float via .item()); at the last step sigma_{i+1} = 0 so "
    "x = denoised.",
    "lora": "TI2VidTwoStagesPipeline stage 2 fuses the distilled LoRA into the bf16 weights at load: delta = bf16((B * strength) @ A) "
    "(bf16 inputs), W' = bf16(W + delta) (bf16_fuse_rule), then cast to float32. The LoRA values make this exact.",
    "decode": "VideoDecoder(latent, AUTO_TILING resolved for the VAE, generator) with the memory-efficient conv decoder; a single "
    "tile at these sizes. Frames are float [0, 1] (x + 1) / 2 clamped; the CLI then converts to yuv420p for H.264.",
}


def save_io(path: Path, tensors: dict, metadata: dict) -> None:
    metadata = dict(metadata)
    metadata["tensors"] = {k: {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")} for k, v in sorted(tensors.items())}
    write_safetensors(path, tensors, metadata)


def main() -> int:  # noqa: PLR0915
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(FIXTURES))
    ap.add_argument("--gemma", default=str(FIXTURES / GEMMA_NAME), help="the tiny Gemma 3 text encoder (single file or root folder)")
    ap.add_argument("--pipelines", default="one_stage,distilled,two_stage", help="one_stage first: its contexts are the shared ones; "
                    "two_stage_hq (TI2VidTwoStagesHQPipeline, res_2s), dfr (DFRPipeline, keyframe-embedding variant) and the "
                    "RUNNERS pipelines (" + ", ".join(RUNNERS) + ") are opt-in")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"failures": [], "stubbed_modules": STUBBED}
    t_start = time.time()

    import transformers

    ref_commit = os.environ.get("LTX_REF_COMMIT", "")
    env = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
        "reference": f"Lightricks LTX-2 ltx_core / ltx_pipelines {ref_commit}".strip(),
        "device": "cpu",
        "threads": torch.get_num_threads(),
    }
    summary["env"] = env
    log("env:", json.dumps(env), "stubbed:", STUBBED)

    # ---- weights
    log("== weights")
    ckpt, ups, lora, md, wnotes = build_weights(args.gemma)
    ckpt_path, ups_path, lora_path = out / CKPT_NAME, out / UPSAMPLER_NAME, out / LORA_NAME
    write_safetensors(ckpt_path, ckpt, {"config": md["config"], "model_version": MODEL_VERSION})
    write_safetensors(ups_path, ups, {"config": UPSAMPLER_CONFIG})
    write_safetensors(lora_path, lora, {"format": "pt"})
    summary["weights_notes"] = wnotes
    try:
        summary["official_load"] = check_official_load(ckpt_path, ups_path, ckpt, ups, args.gemma)
    except Exception:  # noqa: BLE001
        summary["failures"].append("official_load")
        log(traceback.format_exc())

    files = {
        CKPT_NAME: sha256(ckpt_path),
        UPSAMPLER_NAME: sha256(ups_path),
        LORA_NAME: sha256(lora_path),
    }
    gemma = Path(args.gemma)
    if gemma.is_file():
        files[gemma.name] = sha256(gemma)

    # ---- pipelines
    install_recorders()
    install_latent_widths(VIDEO_LATENT_CHANNELS, AUDIO_LATENT_CHANNELS, AUDIO_LATENT_MEL_BINS)
    paths = {"checkpoint": str(ckpt_path), "gemma": str(gemma), "upsampler": str(ups_path), "lora": str(lora_path)}
    if "dfr" in args.pipelines.split(","):
        kf_ckpt, tups, kf_embedding, dnotes = build_dfr_weights(ckpt)
        kf_md = json.loads(json.dumps(md["config"]))
        kf_md["transformer"]["use_keyframes_abs_pos_embedding"] = True
        kf_path, tups_path = out / KF_CKPT_NAME, out / TEMPORAL_UPSAMPLER_NAME
        write_safetensors(kf_path, kf_ckpt, {"config": kf_md, "model_version": MODEL_VERSION})
        write_safetensors(tups_path, tups, {"config": TEMPORAL_UPSAMPLER_CONFIG})
        summary["weights_notes"]["dfr"] = dnotes
        files[KF_CKPT_NAME] = sha256(kf_path)
        files[TEMPORAL_UPSAMPLER_NAME] = sha256(tups_path)
        paths.update({"kf_checkpoint": str(kf_path), "temporal_upsampler": str(tups_path), "kf_embedding": kf_embedding})
    if any(p.startswith("ic_lora") or p == "dubit" for p in args.pipelines.split(",")):
        ic_path = write_ic_lora(out, lora)
        files[IC_LORA_NAME] = sha256(ic_path)
        paths["ic_lora"] = str(ic_path)
    text_ref: dict[str, torch.Tensor] | None = None
    text_prompts: list[str] | None = None
    for name in [p for p in args.pipelines.split(",") if p]:
        log(f"== pipeline {name}")
        try:
            request = run_pipeline(name, paths)
        except Exception:  # noqa: BLE001
            summary["failures"].append(name)
            log(traceback.format_exc())
            root = gemma.parent / GEMMA_ROOT_NAME
            if not R.contexts and gemma.is_file() and root.is_dir():
                log("  retrying with the Gemma root folder")
                paths["gemma"] = str(root)
                try:
                    request = run_pipeline(name, paths)
                    summary["gemma_fallback"] = GEMMA_ROOT_NAME
                except Exception:  # noqa: BLE001
                    log(traceback.format_exc())
                    continue
            else:
                continue
        tensors = dict(R.t)
        # contexts: one shared text file; a pipeline keeps its own copy only when not bit-identical
        ctx = {}
        for i, label in enumerate(["positive", "negative"][: len(R.contexts)]):
            c = R.contexts[i]
            ctx[f"out.text.{label}.video_encoding"] = c.video_encoding.detach().cpu().float().clone()
            if c.audio_encoding is not None:
                ctx[f"out.text.{label}.audio_encoding"] = c.audio_encoding.detach().cpu().float().clone()
            ctx[f"out.text.{label}.attention_mask"] = c.attention_mask.detach().cpu().clone()
        if len(R.contexts) == 2 and text_ref is None:
            text_ref, text_prompts = ctx, list(R.prompts)
        same = text_ref is not None and all(k in text_ref and torch.equal(text_ref[k], v) for k, v in ctx.items())
        if not same:
            tensors.update(ctx)
        metadata = {
            "request": request,
            "prompts_encoded": R.prompts,
            "contexts": "e2e_text.io.safetensors (bit-identical)" if same else "in this file (out.text.*)",
            "calls": R.calls,
            "noise_order": R.noise_order,
            "notes": NOTES,
            "files": files,
            "config": md["config"],
            "model_version": MODEL_VERSION,
            "env": env,
        }
        save_io(out / f"e2e_{name}.io.safetensors", tensors, metadata)
        summary[name] = {"request": request, "contexts_shared": same, "n_tensors": len(tensors)}

    if text_ref is not None:
        save_io(
            out / "e2e_text.io.safetensors",
            text_ref,
            {
                "prompts": text_prompts,
                "calls": {
                    "out.text.<label>.video_encoding / audio_encoding / attention_mask": "PromptEncoder(ModelPaths.from_monolith(ckpt, "
                    "gemma_root=<gemma>), float32, cpu)([prompt, negative_prompt]) -> EmbeddingsProcessorOutput per prompt "
                    "(TI2VidOneStagePipeline's call); positive = prompts[0], negative = prompts[1]",
                },
                "notes": NOTES,
                "files": files,
                "env": env,
            },
        )
    summary["seconds"] = round(time.time() - t_start, 1)
    (out / "gen_e2e.summary.json").write_text(json.dumps(summary, indent=1, default=str))
    (out / "gen_e2e.log").write_text("\n".join(LOG_LINES) + "\n")
    log(f"done in {summary['seconds']} s; failures: {summary['failures']}")
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
