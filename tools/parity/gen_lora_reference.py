#!/usr/bin/env python3
"""Reference fixture for LoRA fusion: two tiny LoRA files for the tiny LTX-2.3 transformer
(tests/fixtures/ltx23.weights.bf16.safetensors) and what the official loader makes of them.

Needs PyTorch and the reference (LTX-2 v1.2.0, packages/ltx-core/src) on PYTHONPATH:

    PYTHONPATH=/path/to/LTX-2/packages/ltx-core/src python3 tools/parity/gen_lora_reference.py \
        --fixtures tests/fixtures --out tests/fixtures

writes (all small, < 200 KB together):

  lora_ltx23.user.safetensors       bf16 factors, rank 4, ComfyUI names
                                    ("diffusion_model.<target>.lora_{A,B}.weight") + "<target>.alpha"
                                    tensors (= rank; the reference ignores them)
  lora_ltx23.distilled.safetensors  f32 factors, rank 3, partly the same targets
  lora_ltx23.io.safetensors         for stage1 = [user @ 0.8] and stage2 = [user @ 0.8, distilled @ 0.6]
                                    (the two-stage pipeline's order: user LoRAs, then the distilled one):
                                      out.<stage>.weight.<target>       the fused weight as the official
                                                                        builder loads it (f32 build)
                                      out.<stage>.video_velocity / .audio_velocity
                                                                        LTXModel forward on the inputs of
                                                                        ltx23.io.safetensors (in.video.*,
                                                                        in.audio.*), f32 compute
                                    metadata: calls, fusion_device, targets

The models are built with SingleGPUModelBuilder(LTXModelConfigurator, weights,
LTXV_MODEL_COMFY_RENAMING_MAP).lora(path, strength, LTXV_LORA_COMFY_RENAMING_MAP) and
build(device=cpu, dtype=float32): the LoRA products are aggregated in bf16 on the fusion device
the reference picks (CUDA when available, else CPU; recorded in the metadata).

Read by tests/models/lora_test.cpp (LoraReference.*), which skips while these files are absent.
"""
import argparse
import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx_core.loader import LTXV_LORA_COMFY_RENAMING_MAP
from ltx_core.loader.registry import DummyRegistry
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer.modality import Modality
from ltx_core.model.transformer.model_configurator import (
    LTXV_MODEL_COMFY_RENAMING_MAP,
    LTXModelConfigurator,
)

CPU = torch.device("cpu")

# target (model weight name without ".weight") -> (out, in) of the tiny ltx23 model
USER_TARGETS = {
    "transformer_blocks.0.attn1.to_q": (64, 64),
    "transformer_blocks.1.attn1.to_q": (64, 64),
    "transformer_blocks.0.attn2.to_v": (64, 64),
    "transformer_blocks.1.ff.net.0.proj": (256, 64),
    "transformer_blocks.0.audio_attn1.to_k": (32, 32),
    "transformer_blocks.0.video_to_audio_attn.to_k": (32, 64),
}
DISTILLED_TARGETS = {
    "transformer_blocks.0.attn1.to_q": (64, 64),
    "transformer_blocks.1.audio_ff.net.2": (32, 128),
    "patchify_proj": (64, 24),
    "adaln_single.linear": (576, 64),
}
STAGES = {
    "stage1": [("user", 0.8)],
    "stage2": [("user", 0.8), ("distilled", 0.6)],
}


def factors(targets: dict, rank: int, seed: int, dtype: torch.dtype, alpha: bool) -> dict:
    g = torch.Generator().manual_seed(seed)
    out = {}
    for t, (o, i) in targets.items():
        out[f"diffusion_model.{t}.lora_A.weight"] = (torch.randn(rank, i, generator=g) * 0.2).to(dtype)
        out[f"diffusion_model.{t}.lora_B.weight"] = (torch.randn(o, rank, generator=g) * 0.2).to(dtype)
        if alpha:
            out[f"diffusion_model.{t}.alpha"] = torch.tensor(float(rank))
    return out


def modality(io, which: str) -> Modality:
    def f(name):
        return io.get_tensor(f"in.{which}.{name}").to(torch.float32)

    return Modality(
        latent=f("latent"),
        sigma=f("sigma"),
        timesteps=f("timesteps"),
        positions=f("positions"),
        context=f("context"),
        enabled=True,
        context_mask=None,
        attention_mask=None,
        keyframes_mask=f("keyframes_mask") if which == "video" else None,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default="tests/fixtures", help="folder with ltx23.weights.bf16 / ltx23.io")
    ap.add_argument("--out", default="tests/fixtures")
    args = ap.parse_args()
    fx, out = Path(args.fixtures), Path(args.out)
    weights = str(fx / "ltx23.weights.bf16.safetensors")

    paths = {
        "user": out / "lora_ltx23.user.safetensors",
        "distilled": out / "lora_ltx23.distilled.safetensors",
    }
    save_file(factors(USER_TARGETS, 4, 1234, torch.bfloat16, alpha=True), str(paths["user"]))
    save_file(factors(DISTILLED_TARGETS, 3, 5678, torch.float32, alpha=False), str(paths["distilled"]))

    fusion_device = "cuda" if torch.cuda.is_available() else "cpu"
    tensors: dict[str, torch.Tensor] = {}
    calls = {}
    with safe_open(str(fx / "ltx23.io.safetensors"), framework="pt") as io:
        video, audio = modality(io, "video"), modality(io, "audio")
        for stage, loras in STAGES.items():
            builder = SingleGPUModelBuilder(
                model_class_configurator=LTXModelConfigurator,
                model_path=weights,
                model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP,
                registry=DummyRegistry(),
            )
            for name, strength in loras:
                builder = builder.lora(str(paths[name]), strength, LTXV_LORA_COMFY_RENAMING_MAP)
            model = builder.build(device=CPU, dtype=torch.float32).eval()
            sd = model.state_dict()
            for t in sorted(set(USER_TARGETS) | set(DISTILLED_TARGETS)):
                tensors[f"out.{stage}.weight.{t}"] = sd[f"{t}.weight"].float().contiguous()
            with torch.inference_mode():
                v, a = model(video, audio, None)
            tensors[f"out.{stage}.video_velocity"] = v.float().contiguous()
            tensors[f"out.{stage}.audio_velocity"] = a.float().contiguous()
            calls[stage] = (
                f"SingleGPUModelBuilder(LTXModelConfigurator, {Path(weights).name}, LTXV_MODEL_COMFY_RENAMING_MAP)"
                + "".join(f".lora({paths[n].name}, {s}, LTXV_LORA_COMFY_RENAMING_MAP)" for n, s in loras)
                + ".build(cpu, float32); LTXModel(video, audio, None) on ltx23.io in.* (keyframes_mask for video)"
            )

    metadata = {
        "calls": json.dumps(calls),
        "fusion_device": fusion_device,
        "targets": json.dumps(sorted(set(USER_TARGETS) | set(DISTILLED_TARGETS))),
        "torch": torch.__version__,
    }
    save_file(tensors, str(out / "lora_ltx23.io.safetensors"), metadata=metadata)
    for p in [*paths.values(), out / "lora_ltx23.io.safetensors"]:
        print(f"wrote {p} ({p.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
