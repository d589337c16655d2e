#!/usr/bin/env python3
"""Reference fixtures for the FP8 quantization modes: the tiny LTX-2.3 transformer
(tests/fixtures/ltx23.weights.bf16.safetensors) run by the official loader under its
`fp8-cast` and `fp8-scaled-mm` policies (ltx_core.quantization), on the inputs of
tests/fixtures/ltx23.io.safetensors.

Needs PyTorch (torch._scaled_mm: a CUDA GPU of compute capability 8.9 or newer for the
fp8-scaled-mm part) and the reference (LTX-2 v1.2.0) on PYTHONPATH:

    PYTHONPATH=/path/to/LTX-2/packages/ltx-core/src:/path/to/LTX-2/packages/ltx-pipelines/src \\
        python3 tools/parity/gen_fp8_reference.py --fixtures tests/fixtures --out tests/fixtures

writes (all small, < 1 MB together):

  ltx23.fp8_cast.io.safetensors         fp8-cast (CPU). The transformer io layout: every in.* of
                                        ltx23.io.safetensors as is, and
                                          out.main.{video,audio}_{velocity,denoised}
                                              builder dtype float32, inputs float32: the e4m3
                                              weights are upcast exactly, so this isolates the
                                              quantization from bf16 compute
                                          out.bf16.{video,audio}_velocity
                                              builder dtype bfloat16, latent/context bfloat16 (the
                                              pipelines' dtype), positions/sigma/timesteps float32
                                        metadata: quantization = "fp8-cast", weights_file =
                                        ltx23.weights.bf16.safetensors (the policy quantizes at
                                        load time), calls, torch, failures

  ltx23.fp8_scaled.weights.safetensors  a pre-quantized checkpoint in the published FP8 layout: for
                                        every Linear the fp8-cast policy picks (transformer_blocks.*
                                        to_q/k/v, to_out.0, ff.net.0.proj, ff.net.2, video and
                                        audio), model.diffusion_model.<layer>.weight float8_e4m3fn and
                                        .weight_scale f32 0-d from the reference's own
                                        quantize_weight_to_fp8_per_tensor (on the bf16 weight), and
                                        .input_scale f32 0-d from the calibration rule below; every
                                        other tensor and the metadata (config) as in the bf16 file.
                                        Calibration (the reference ships no rule; its checkpoints
                                        come with input_scale): input_scale = amax|x| / 448 over the
                                        layer's inputs in a float32 forward of the unquantized model
                                        on the io inputs (1.0 for an all-zero input), so the
                                        fixture's own activations are never clamped

  ltx23.fp8_scaled.io.safetensors       fp8-scaled-mm (CUDA): that checkpoint loaded through
                                        fp8_scaled_mm.build_policy(checkpoint); same io layout,
                                        out.main.* with builder dtype float32 and out.bf16.* with
                                        bfloat16 as above; metadata: quantization = "fp8-scaled-mm",
                                        weights_file = ltx23.fp8_scaled.weights.safetensors, ...

  ltx23.fp8_scaled.linear.safetensors   single FP8Linear calls for the op tests, per <tag> =
                                        <dtype>.<layer> (dtype f32 or bf16, the two builds above;
                                        layers transformer_blocks.0.attn1.to_q and
                                        transformer_blocks.1.ff.net.0.proj):
                                          <tag>.x / .y        the module's input and output in that
                                                              forward (hooks; sample 0, tokens 0-15)
                                          <tag>.x8 / .y8      x * 8 and the module's output on it
                                                              (most values past the calibrated range:
                                                              the clamp at +-448)
                                          <tag>.q / .q8       the activation quantization alone, the
                                                              expression FP8Linear.forward starts with
                                          <tag>.weight / .weight_scale / .input_scale / .bias
                                                              the module's parameters

Any part that fails is reported (traceback, and its name in the metadata's "failures") and the
others are still written; the exit status is 1 when something failed.

Read by tests/ops/quantized_linear_test.cpp (Fp8ScaledReference.*, the .linear file; skips while
it is absent) and, once the modes are wired, by `ltx parity transformer --quantization MODE`.
"""
import argparse
import importlib
import json
import sys
import traceback
from pathlib import Path
from unittest import mock

# Optional media packages some ltx_core modules import at load time; stubbed only when missing
# (nothing here decodes media).
for _name in ("av", "OpenImageIO"):
    try:
        importlib.import_module(_name)
    except Exception:  # noqa: BLE001
        sys.modules[_name] = mock.MagicMock(name=_name)

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from ltx_core.loader.registry import DummyRegistry  # noqa: E402
from ltx_core.loader.sd_ops import SDOps  # noqa: E402
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder  # noqa: E402
from ltx_core.model.transformer.modality import Modality  # noqa: E402
from ltx_core.model.transformer.model import X0Model  # noqa: E402
from ltx_core.model.transformer.model_configurator import (  # noqa: E402
    LTXV_MODEL_COMFY_RENAMING_MAP,
    LTXModelConfigurator,
)
from ltx_core.quantization import fp8_cast, fp8_scaled_mm  # noqa: E402

CPU = torch.device("cpu")
PREFIX = "model.diffusion_model."
FP8_MAX = torch.finfo(torch.float8_e4m3fn).max
OP_LAYERS = ("transformer_blocks.0.attn1.to_q", "transformer_blocks.1.ff.net.0.proj")
FAILURES: list[str] = []


def attempt(name: str, fn) -> bool:
    """Runs one part; a failure is printed and recorded, and the script goes on."""
    try:
        fn()
        return True
    except Exception:  # noqa: BLE001
        print(f"[{name}] FAILED:", file=sys.stderr)
        traceback.print_exc()
        FAILURES.append(name)
        return False


def read_io(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys() if k.startswith("in.")}
        metadata = dict(f.metadata() or {})
    return tensors, metadata


def modality(inputs: dict, which: str, dtype: torch.dtype, device: torch.device) -> Modality:
    """The io's inputs as the reference's Modality: latent and context in `dtype`, positions,
    sigma, timesteps and the keyframes mask in float32 (as the pipelines and
    ltx23.io.safetensors' bf16 run pass them)."""

    def f(name: str, dt: torch.dtype = torch.float32) -> torch.Tensor:
        return inputs[f"in.{which}.{name}"].to(device=device, dtype=dt)

    return Modality(
        latent=f("latent", dtype),
        sigma=f("sigma"),
        timesteps=f("timesteps"),
        positions=f("positions"),
        context=f("context", dtype),
        enabled=True,
        context_mask=None,
        attention_mask=None,
        keyframes_mask=f("keyframes_mask") if which == "video" else None,
    )


def builder(weights: Path, sd_ops: SDOps, module_ops=(), fuse_rule=None) -> SingleGPUModelBuilder:
    kwargs = {"fuse_rule": fuse_rule} if fuse_rule is not None else {}
    return SingleGPUModelBuilder(
        model_class_configurator=LTXModelConfigurator,
        model_path=str(weights),
        model_sd_ops=sd_ops,
        module_ops=tuple(module_ops),
        registry=DummyRegistry(),
        **kwargs,
    )


def with_policy_sd_ops(policy) -> SDOps:
    """The renaming map followed by the policy's state-dict ops, as the pipelines chain them."""
    if policy.sd_ops is None:
        return LTXV_MODEL_COMFY_RENAMING_MAP
    return SDOps(
        name=f"{LTXV_MODEL_COMFY_RENAMING_MAP.name}+{policy.sd_ops.name}",
        mapping=(*LTXV_MODEL_COMFY_RENAMING_MAP.mapping, *policy.sd_ops.mapping),
    )


def build(b: SingleGPUModelBuilder, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    model = b.build(device=device, dtype=dtype)
    meta = [n for n, p in list(model.named_parameters()) + list(model.named_buffers()) if p.is_meta]
    if meta:
        raise RuntimeError(f"the official loader left parameters uninitialised: {meta[:8]}")
    return model.eval()


def forward_outputs(model, inputs: dict, dtype: torch.dtype, device: torch.device, variant: str, outs: dict,
                    denoised: bool) -> None:
    """Runs LTXModel (and X0Model for the denoised outputs) and stores out.<variant>.* as float32."""
    video, audio = modality(inputs, "video", dtype, device), modality(inputs, "audio", dtype, device)
    with torch.inference_mode():
        v, a = model(video, audio, None)
        outs[f"out.{variant}.video_velocity"] = v.float().cpu().contiguous()
        outs[f"out.{variant}.audio_velocity"] = a.float().cpu().contiguous()
        if denoised:
            dv, da = X0Model(model)(video, audio, None)
            outs[f"out.{variant}.video_denoised"] = dv.float().cpu().contiguous()
            outs[f"out.{variant}.audio_denoised"] = da.float().cpu().contiguous()


def io_metadata(base: dict, mode: str, weights_file: str, calls: dict) -> dict:
    keep = {k: v for k, v in base.items() if k not in ("tensors", "notes", "calls", "weights_file", "reference")}
    keep.update(
        {
            "quantization": mode,
            "weights_file": weights_file,
            "calls": json.dumps(calls),
            "reference": "Lightricks LTX-2 v1.2.0 (ltx_core)",
            "torch": torch.__version__,
            "failures": json.dumps(FAILURES),
        }
    )
    return keep


def quantized_layer_names(weights: Path) -> list[str]:
    """The Linears the fp8-cast policy picks (its own predicate), as module names."""
    with safe_open(str(weights), framework="pt") as f:
        keys = list(f.keys())
    names = [k[len(PREFIX) : -len(".weight")] for k in keys if k.startswith(PREFIX) and k.endswith(".weight")]
    return sorted(n for n in names if fp8_cast._is_fp8_cast_linear(n))


def calibrate(weights: Path, inputs: dict, layers: list[str]) -> dict[str, float]:
    """amax|x| of each layer's input over a float32 forward of the unquantized model."""
    model = build(builder(weights, LTXV_MODEL_COMFY_RENAMING_MAP), CPU, torch.float32)
    amax: dict[str, float] = {}
    hooks = []
    for name in layers:

        def hook(_m, args, name=name):
            amax[name] = max(amax.get(name, 0.0), float(args[0].detach().abs().max()))

        hooks.append(model.get_submodule(name).register_forward_pre_hook(hook))
    forward_outputs(model, inputs, torch.float32, CPU, "calibration", {}, denoised=False)
    for h in hooks:
        h.remove()
    missing = [n for n in layers if n not in amax]
    if missing:
        raise RuntimeError(f"calibration saw no input for {missing}")
    return amax


def write_fp8_scaled_checkpoint(weights: Path, path: Path, layers: list[str], amax: dict[str, float]) -> None:
    with safe_open(str(weights), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        metadata = dict(f.metadata() or {})
    for name in layers:
        key = f"{PREFIX}{name}"
        q, weight_scale = fp8_scaled_mm.quantize_weight_to_fp8_per_tensor(tensors[f"{key}.weight"])
        tensors[f"{key}.weight"] = q.contiguous()
        tensors[f"{key}.weight_scale"] = weight_scale.to(torch.float32).reshape(())
        scale = amax[name] / FP8_MAX if amax[name] > 0 else 1.0
        tensors[f"{key}.input_scale"] = torch.tensor(scale, dtype=torch.float32)
    save_file(tensors, str(path), metadata=metadata)


def record_linears(model, inputs: dict, dtype: torch.dtype, device: torch.device, tag: str, ops: dict) -> None:
    """One forward with hooks on OP_LAYERS, then each module on its input times 8."""
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    hooks = []
    for name in OP_LAYERS:

        def hook(_m, args, out, name=name):
            if name not in seen:
                seen[name] = (args[0].detach().clone(), out.detach().clone())

        hooks.append(model.get_submodule(name).register_forward_hook(hook))
    forward_outputs(model, inputs, dtype, device, "ops", {}, denoised=False)
    for h in hooks:
        h.remove()
    with torch.inference_mode():
        for name in OP_LAYERS:
            m = model.get_submodule(name)
            if not isinstance(m, fp8_scaled_mm.FP8Linear):
                raise RuntimeError(f"{name} was not swapped to FP8Linear (it is {type(m).__name__})")
            # The first 16 tokens of sample 0 keep the file small; a linear is row by row.
            x, y = (t[:1, :16] for t in seen[name])
            x8 = x * 8
            p = f"{tag}.{name}"

            def quantize(t: torch.Tensor) -> torch.Tensor:
                # The first line of FP8Linear.forward, alone.
                return torch.clamp(t * m.input_scale.reciprocal(), -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)

            ops[f"{p}.x"], ops[f"{p}.y"] = x, y
            ops[f"{p}.x8"], ops[f"{p}.y8"] = x8, m(x8)
            ops[f"{p}.q"], ops[f"{p}.q8"] = quantize(x), quantize(x8)
            ops[f"{p}.weight"] = m.weight.detach()
            ops[f"{p}.weight_scale"] = m.weight_scale.detach().reshape(())
            ops[f"{p}.input_scale"] = m.input_scale.detach().reshape(())
            if m.bias is not None:
                ops[f"{p}.bias"] = m.bias.detach()
    for k in list(ops):
        ops[k] = ops[k].cpu().contiguous()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", default="tests/fixtures", help="folder with ltx23.weights.bf16 / ltx23.io")
    ap.add_argument("--out", default="tests/fixtures")
    args = ap.parse_args()
    fx, out = Path(args.fixtures), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    weights = fx / "ltx23.weights.bf16.safetensors"
    inputs, io_md = read_io(fx / "ltx23.io.safetensors")
    written: list[Path] = []

    # ---- fp8-cast, CPU ----
    cast_outs: dict[str, torch.Tensor] = {}
    cast_calls: dict[str, str] = {}

    def fp8_cast_variant(variant: str, dtype: torch.dtype) -> None:
        policy = fp8_cast.build_policy(str(weights))
        b = builder(weights, with_policy_sd_ops(policy), policy.module_ops, policy.fuse_rule)
        model = build(b, CPU, dtype)
        forward_outputs(model, inputs, dtype, CPU, variant, cast_outs, denoised=variant == "main")
        cast_calls[variant] = (
            f"SingleGPUModelBuilder(LTXModelConfigurator, {weights.name}, LTXV_MODEL_COMFY_RENAMING_MAP + "
            f"fp8_cast.build_policy(...).sd_ops, module_ops=policy.module_ops, fuse_rule=policy.fuse_rule)"
            f".build(cpu, {dtype}); LTXModel(video, audio, None) on ltx23.io in.* (latent/context {dtype}, "
            "positions/sigma/timesteps/keyframes_mask float32)"
            + ("; X0Model(same) -> *_denoised" if variant == "main" else "")
        )

    attempt("fp8-cast/main", lambda: fp8_cast_variant("main", torch.float32))
    attempt("fp8-cast/bf16", lambda: fp8_cast_variant("bf16", torch.bfloat16))
    if cast_outs:
        path = out / "ltx23.fp8_cast.io.safetensors"
        save_file({**inputs, **cast_outs}, str(path), metadata=io_metadata(io_md, "fp8-cast", weights.name, cast_calls))
        written.append(path)

    # ---- fp8-scaled-mm: the checkpoint on the CPU, the forwards on CUDA ----
    ckpt = out / "ltx23.fp8_scaled.weights.safetensors"
    layers = quantized_layer_names(weights)
    state: dict = {}

    def make_checkpoint() -> None:
        amax = calibrate(weights, inputs, layers)
        write_fp8_scaled_checkpoint(weights, ckpt, layers, amax)
        state["amax"] = amax
        written.append(ckpt)

    if attempt("fp8-scaled-mm/checkpoint", make_checkpoint):
        if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
            print("fp8-scaled-mm forwards need a CUDA GPU of compute capability >= 8.9 (torch._scaled_mm)",
                  file=sys.stderr)
            FAILURES.append("fp8-scaled-mm/no-gpu")
        else:
            gpu = torch.device("cuda")
            scaled_outs: dict[str, torch.Tensor] = {}
            scaled_calls: dict[str, str] = {}
            ops: dict[str, torch.Tensor] = {}

            def fp8_scaled_variant(variant: str, dtype: torch.dtype, tag: str) -> None:
                policy = fp8_scaled_mm.build_policy(str(ckpt))
                b = builder(ckpt, with_policy_sd_ops(policy), policy.module_ops, policy.fuse_rule)
                model = build(b, gpu, dtype)
                swapped = sum(isinstance(m, fp8_scaled_mm.FP8Linear) for m in model.modules())
                if swapped != len(layers):
                    raise RuntimeError(f"{swapped} FP8Linear modules, expected {len(layers)}")
                forward_outputs(model, inputs, dtype, gpu, variant, scaled_outs, denoised=variant == "main")
                scaled_calls[variant] = (
                    f"SingleGPUModelBuilder(LTXModelConfigurator, {ckpt.name}, LTXV_MODEL_COMFY_RENAMING_MAP, "
                    f"module_ops=fp8_scaled_mm.build_policy(...).module_ops, fuse_rule=policy.fuse_rule)"
                    f".build(cuda, {dtype}); LTXModel(video, audio, None) on ltx23.io in.* (latent/context "
                    f"{dtype}, positions/sigma/timesteps/keyframes_mask float32)"
                    + ("; X0Model(same) -> *_denoised" if variant == "main" else "")
                )
                attempt(f"fp8-scaled-mm/linears/{tag}", lambda: record_linears(model, inputs, dtype, gpu, tag, ops))

            attempt("fp8-scaled-mm/main", lambda: fp8_scaled_variant("main", torch.float32, "f32"))
            attempt("fp8-scaled-mm/bf16", lambda: fp8_scaled_variant("bf16", torch.bfloat16, "bf16"))
            if scaled_outs:
                path = out / "ltx23.fp8_scaled.io.safetensors"
                md = io_metadata(io_md, "fp8-scaled-mm", ckpt.name, scaled_calls)
                md["calibration"] = json.dumps(
                    {"rule": "input_scale = amax|x| / 448 over a float32 forward of the unquantized model on in.*",
                     "amax": state["amax"]}
                )
                md["device"] = torch.cuda.get_device_name()
                save_file({**inputs, **scaled_outs}, str(path), metadata=md)
                written.append(path)
            if ops:
                path = out / "ltx23.fp8_scaled.linear.safetensors"
                save_file(ops, str(path), metadata={
                    "layers": json.dumps(list(OP_LAYERS)),
                    "weights_file": ckpt.name,
                    "calls": "forward hooks on FP8Linear modules of the fp8-scaled-mm builds (f32, bf16); "
                             "y8 = module(x * 8); q = clamp(x * input_scale.reciprocal(), -448, 448)"
                             ".to(float8_e4m3fn)",
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                })
                written.append(path)

    total = 0
    for p in written:
        size = p.stat().st_size
        total += size
        print(f"wrote {p} ({size} bytes)")
    print(f"total {total} bytes")
    if FAILURES:
        print(f"FAILED parts: {FAILURES}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
