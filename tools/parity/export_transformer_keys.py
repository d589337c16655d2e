#!/usr/bin/env python3
"""Export the published key names and shapes of the full-size LTX-2.3 and LTX-2.5 (22B)
transformers, built by the official reference on PyTorch's meta device (no memory, no weights).

Needs the reference (LTX-2 v1.2.0, packages/ltx-core/src) on PYTHONPATH and PyTorch:

    PYTHONPATH=/path/to/LTX-2/packages/ltx-core/src python3 tools/parity/export_transformer_keys.py \
        --out tests/fixtures

writes tests/fixtures/transformer_keys_ltx23_22b.txt and transformer_keys_ltx25_22b.txt, read by
tests/models/transformer_model_test.cpp (Transformer22B.*). File format, one entry per line:

    # comment lines; '# config.transformer: <json>' holds the config the model was built from,
    # '# model_version: <string>' the version metadata
    model.diffusion_model.patchify_proj.weight 4096 128

(name, then the dims; the names carry the published "model.diffusion_model." prefix, i.e. the
reference's LTXV_MODEL_COMFY_RENAMING_MAP inverted). Only the transformer's own parameters are
listed: the text connectors that real files store under the same prefix are not part of LTXModel.

The configs below are the published files' transformer sections as the golden data set
(shared/golden/README.md section 2) reproduces them, at the real sizes (48 layers, 32 x 128 video
heads, 32 x 64 audio heads, 128 latent channels, 3840 caption channels).
"""
import argparse
import json
import os

import torch

from ltx_core.model.transformer.model_configurator import (
    LTXV_MODEL_COMFY_RENAMING_MAP,
    LTXModelConfigurator,
)

PREFIX = "model.diffusion_model."

_COMMON = {
    "_class_name": "AVTransformer3DModel",
    "activation_fn": "gelu-approximate",
    "apply_gated_attention": True,
    "attention_bias": True,
    "attention_head_dim": 128,
    "attention_type": "default",
    "audio_attention_head_dim": 64,
    "audio_connector_attention_head_dim": 64,
    "audio_connector_num_attention_heads": 32,
    "audio_cross_attention_dim": 2048,
    "audio_in_channels": 128,
    "audio_num_attention_heads": 32,
    "audio_out_channels": 128,
    "audio_positional_embedding_max_pos": [20],
    "av_ca_timestep_scale_multiplier": 1000.0,
    "av_cross_ada_norm": True,
    "caption_channels": 3840,
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "causal_temporal_positioning": True,
    "connector_apply_gated_attention": True,
    "connector_attention_head_dim": 128,
    "connector_learnable_registers_std": 1,
    "connector_norm_output": True,
    "connector_num_attention_heads": 32,
    "connector_num_layers": 8,
    "connector_num_learnable_registers": 128,
    "connector_positional_embedding_max_pos": [4096],
    "cross_attention_adaln": True,
    "cross_attention_dim": 4096,
    "cross_attention_norm": True,
    "double_self_attention": False,
    "dropout": 0.0,
    "frequencies_precision": "float64",
    "in_channels": 128,
    "norm_elementwise_affine": False,
    "norm_eps": 1e-06,
    "norm_num_groups": 32,
    "num_attention_heads": 32,
    "num_embeds_ada_norm": 1000,
    "num_layers": 48,
    "num_vector_embeds": None,
    "only_cross_attention": False,
    "out_channels": 128,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "positional_embedding_theta": 10000.0,
    "positional_embedding_type": "rope",
    "qk_norm": "rms_norm",
    "rope_type": "split",
    "share_ff": False,
    "standardization_norm": "rms_norm",
    "timestep_scale_multiplier": 1000,
    "upcast_attention": False,
    "use_audio_video_cross_attention": True,
    "use_embeddings_connector": True,
    "use_linear_projection": False,
    "use_middle_indices_grid": True,
}

MODELS = {
    "ltx23_22b": {
        "model_version": "2.3.0",
        "transformer": dict(_COMMON, text_encoder_norm_type="per_token_rms"),
    },
    "ltx25_22b": {
        "model_version": "2.5.0",
        "transformer": dict(
            _COMMON,
            text_encoder_norm_type="PER_TOKEN_RMS",
            ff_bias=False,
            use_keyframes_abs_pos_embedding=True,
        ),
    },
}


def published_name(model_key: str) -> str:
    """The on-disk name of a model parameter (the renaming map only strips PREFIX)."""
    name = PREFIX + model_key
    # The reference's own loader map must send the published name back to the model name.
    mapped = LTXV_MODEL_COMFY_RENAMING_MAP.apply_to_key(name)
    assert mapped == model_key, (name, mapped)
    return name


def export(case: str, spec: dict, out_dir: str) -> str:
    metadata = {"config": {"transformer": spec["transformer"]}, "model_version": spec["model_version"]}
    with torch.device("meta"):
        model = LTXModelConfigurator.from_metadata(metadata)
    state = model.state_dict()
    lines = [
        f"# {case}: LTXModel (AudioVideo) built by LTXModelConfigurator.from_metadata on the meta "
        f"device, torch {torch.__version__}; names as published (renaming map "
        f"{LTXV_MODEL_COMFY_RENAMING_MAP.name}), {len(state)} tensors",
        "# config.transformer: " + json.dumps(spec["transformer"], sort_keys=True),
        "# model_version: " + spec["model_version"],
    ]
    for key in sorted(state):
        shape = " ".join(str(d) for d in state[key].shape)
        lines.append(f"{published_name(key)} {shape}".rstrip())
    path = os.path.join(out_dir, f"transformer_keys_{case}.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    per_block = sum(1 for k in state if k.startswith("transformer_blocks.0."))
    print(f"{path}: {len(state)} tensors, {per_block} per block")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures", help="output folder")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for case, spec in MODELS.items():
        export(case, spec, args.out)


if __name__ == "__main__":
    main()
