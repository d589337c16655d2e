#!/usr/bin/env python3
"""The OFFICIAL LTX-2 v1.2.0 transformer step under the reference's FP8 quantization policies.

Times the step that bench_official.py times (LTX-2.3 22B, random bf16 weights, 768x512 and
1536x1024, 121 frames + 126 audio tokens, 1024 text tokens, the distilled pipeline's SimpleDenoiser
call) after the model is quantized the way the reference's loader would quantize it:

  fp8-cast       ltx_core.quantization.fp8_cast.build_policy of a bf16 checkpoint: its sd_ops
                 (the Linears' weights and biases cast to e4m3) are applied to every state-dict
                 entry of the random bf16 model, its module op retypes those Linears to
                 Fp8CastLinear (upcast to bf16 in every forward), then the converted entries are
                 assigned as the loader's load_state_dict(assign=True) does.
  fp8-scaled-mm  ltx_core.quantization.fp8_scaled_mm.build_policy of a pre-quantized checkpoint:
                 FP8Linear (torch._scaled_mm) for the Linears the checkpoint holds as F8_E4M3
                 .weight + .weight_scale. Weights quantized with the reference's own
                 quantize_weight_to_fp8_per_tensor; input_scale = amax / 448 of each Linear's input
                 over one bf16 forward of each timed size (static max calibration). Layer set: the
                 Linears fp8-cast quantizes (see bench/README.md for why).

Each policy runs eager, torch.compile (compile_transformer) and torch.compile + CUDA-graph capture,
as bench_official.py's sections do; eager sections also record the relative L2 error of the
transformer output against the bf16 model on the same inputs. Sections run in priority order while
the --budget lasts; a failing section is recorded and the next one runs.

bench_official.py is imported as a module (--official-bench) for its reference import, stubs,
model builder, inputs, step and timing; the reference source comes from --ref / LTX_REF as there.

Usage (CUDA machine with PyTorch):
  LTX_REF=/path/to/LTX-2 OUT=out python3 tools/bench/official_quantized_step.py [--skip ...]
Results: $OUT/official_quantized_step.json (+ .txt), or <repo>/out/ when OUT is unset.
"""

from __future__ import annotations

import time

T_START = time.time()

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_official_module import import_bench_official  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.environ.get("OUT") or os.path.join(REPO_ROOT, "out")
TXT_PATH = os.path.join(OUT_DIR, "official_quantized_step.txt")
JSON_PATH = os.path.join(OUT_DIR, "official_quantized_step.json")

POLICIES = ("fp8-scaled-mm", "fp8-cast")
MODES = ("eager", "capture", "compiled")
MODE_LABEL = {"eager": "eager", "compiled": "compiled", "capture": "compiled+capture"}
# Priority order (the budget drops the tail): the issue compares against fp8-scaled-mm first, and
# compile + CUDA graphs is the official stack's fastest form.
SECTION_ORDER = [("fp8-scaled-mm", "eager"), ("fp8-scaled-mm", "capture"), ("fp8-cast", "eager"),
                 ("fp8-cast", "capture"), ("fp8-scaled-mm", "compiled"), ("fp8-cast", "compiled")]
# Seconds a section needs to finish on an H100 (build + quantize + 2 sizes x 7 steps, plus the
# first-call compile for the compiled ones); a section starts only when that much budget is left.
NEED_S = {"eager": 80, "capture": 120, "compiled": 120}
HARD_LIMIT_MARGIN_S = 60  # the alarm after --budget: a section that overruns is cut, the JSON stays
FP8_E4M3_MAX = 448.0

RESULTS: dict = {"sections": {}}
_txt = None
bo = None  # the imported bench_official module


def elapsed() -> float:
    return time.time() - T_START


def log(*args: object) -> None:
    s = " ".join(str(a) for a in args)
    print(s, flush=True)
    if _txt is not None:
        _txt.write(s + "\n")
        _txt.flush()


def save_json() -> None:
    tmp = JSON_PATH + ".tmp"
    with open(tmp, "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)
    os.replace(tmp, JSON_PATH)


class HardTimeLimit(BaseException):  # not caught by the reference's or bench_official's `except Exception`
    pass


def _on_alarm(signum, frame):  # noqa: ANN001, ANN202, ARG001
    raise HardTimeLimit(f"hard time limit reached at t={elapsed():.0f} s")


# --------------------------------------------------------------------------------------------
# bench_official.py as a module
# --------------------------------------------------------------------------------------------
def import_official_bench(path: str, ref: str | None):  # noqa: ANN201
    """Imports bench_official.py without letting it touch our output folder: at import it opens
    $OUT/bench_official.txt for writing, which would truncate a bf16 run's log in the same OUT."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--official-bench {path}: no such file (give the path of bench_official.py)")
    if ref is not None:
        if not os.path.isdir(os.path.join(ref, "packages", "ltx-core", "src")):
            raise FileNotFoundError(f"--ref {ref}: not an unpacked LTX-2 tree (no packages/ltx-core/src)")
        os.environ["LTX_REF"] = ref
    mod, _ = import_bench_official(
        path,
        ("import_reference", "build_transformer", "build_inputs", "make_step", "run_transformer_sizes",
         "describe_model", "free_cuda", "fmt_gib", "SIZES", "LTX23_TRANSFORMER", "DEV", "DTYPE", "REF"),
        "bench_official_import_")
    # Its log() lines (per-size timings, profiles) go to our text file.
    mod._txt = _txt
    return mod


# --------------------------------------------------------------------------------------------
# Policies, built with the reference's own factories from a checkpoint header
# --------------------------------------------------------------------------------------------
RAW_PREFIX = "model.diffusion_model."  # the prefix the published files store transformer keys under


def cast_linear_names(R: dict, tcfg: dict) -> list[str]:
    """The Linears fp8-cast retypes: apply its module op to a meta model (no memory) and list them."""
    from ltx_core.quantization.fp8_cast import UPCAST_DURING_INFERENCE, Fp8CastLinear

    meta = R["create_meta_model"](R["LTXModelConfigurator"], {"config": {"transformer": tcfg}},
                                  (UPCAST_DURING_INFERENCE,))
    return [n for n, m in meta.named_modules() if isinstance(m, Fp8CastLinear)]


def header_file(tensors: dict, folder: str, name: str) -> str:
    """A small safetensors file whose header lists `tensors` (one element each): what the policy
    factories read from a checkpoint (key names and dtypes) without the 20 GB of payload."""
    from safetensors.torch import save_file

    path = os.path.join(folder, name)
    save_file(tensors, path)
    return path


def fp8_cast_policy(folder: str):  # noqa: ANN201
    """fp8_cast.build_policy of a bf16 checkpoint (no *_scale siblings to fold)."""
    import torch
    from ltx_core.quantization.fp8_cast import build_policy

    path = header_file({RAW_PREFIX + "patchify_proj.weight": torch.zeros(1, dtype=torch.bfloat16)}, folder,
                       "bf16_checkpoint_header.safetensors")
    return build_policy(path)


def fp8_scaled_mm_policy(folder: str, layers: list[str]):  # noqa: ANN201
    """fp8_scaled_mm.build_policy of a pre-quantized checkpoint holding `layers` as F8_E4M3 .weight +
    f32 .weight_scale / .input_scale (the policy discovers its swap set from those dtypes)."""
    import torch
    from ltx_core.quantization.fp8_scaled_mm import build_policy

    t: dict = {}
    for n in layers:
        t[RAW_PREFIX + n + ".weight"] = torch.zeros(1, dtype=torch.float32).to(torch.float8_e4m3fn)
        t[RAW_PREFIX + n + ".weight_scale"] = torch.ones((), dtype=torch.float32)
        t[RAW_PREFIX + n + ".input_scale"] = torch.ones((), dtype=torch.float32)
    path = header_file(t, folder, "fp8_checkpoint_header.safetensors")
    return build_policy(path)


def convert_fp8_cast(model, folder: str):  # noqa: ANN001, ANN201
    """fp8-cast's sd_ops applied to every state-dict entry of the bf16 model, as the loader applies
    them to each checkpoint tensor. Returns (policy, converted state dict, info)."""
    import torch

    policy = fp8_cast_policy(folder)
    sd: dict = {}
    with torch.no_grad():
        for key, value in model.state_dict().items():
            for new_key, new_value in policy.sd_ops.apply_to_key_value(key, value):
                sd[new_key] = new_value
    fp8_keys = sorted(k for k, v in sd.items() if v.dtype == torch.float8_e4m3fn)
    info = {
        "policy": "fp8-cast",
        "factory": "ltx_core.quantization.fp8_cast.build_policy (bf16 checkpoint header, no scales)",
        "sd_ops": policy.sd_ops.name,
        "module_ops": [op.name for op in policy.module_ops],
        "fp8_tensors (weights + biases)": len(fp8_keys),
        "fp8_GiB": sum(sd[k].numel() for k in fp8_keys) / 2**30,
    }
    return policy, sd, info


def convert_fp8_scaled_mm(model, folder: str, layers: list[str], amax: dict[str, float]):  # noqa: ANN001, ANN201
    """The state dict of a pre-quantized fp8 checkpoint made from the bf16 model: for each of
    `layers`, weight / weight_scale by the reference's quantize_weight_to_fp8_per_tensor and
    input_scale = amax / 448; every other tensor (biases included) as it is, bf16.
    Returns (policy, converted state dict, info)."""
    import torch
    from ltx_core.quantization.fp8_scaled_mm import quantize_weight_to_fp8_per_tensor

    policy = fp8_scaled_mm_policy(folder, layers)
    scales = []
    with torch.no_grad():
        sd = dict(model.state_dict())
        for n in layers:
            w_q, w_s = quantize_weight_to_fp8_per_tensor(sd[n + ".weight"])
            sd[n + ".weight"] = w_q.contiguous()  # [out, in] row-major: _scaled_mm reads weight.t()
            sd[n + ".weight_scale"] = w_s.to(torch.float32).reshape(())
            a = max(amax[n], 1e-12)
            sd[n + ".input_scale"] = torch.tensor(a / FP8_E4M3_MAX, dtype=torch.float32, device=w_q.device)
            scales.append(a / FP8_E4M3_MAX)
            del w_q, w_s
    info = {
        "policy": "fp8-scaled-mm",
        "factory": "ltx_core.quantization.fp8_scaled_mm.build_policy (F8_E4M3 checkpoint header)",
        "module_ops": [op.name for op in policy.module_ops],
        "layer_set": "the Linears fp8-cast quantizes (transformer_blocks.* .to_q / .to_k / .to_v / .to_out.0 / "
                     "ff.net.0.proj / ff.net.2, audio FF included; to_gate_logits not)",
        "weights": "quantize_weight_to_fp8_per_tensor (scale = 448 / amax(|W|), stored 1 / scale)",
        "input_scale": "static: amax(|x|) / 448 per Linear, max over one bf16 forward at each timed size",
        "input_scale_min": min(scales),
        "input_scale_median": statistics.median(scales),
        "input_scale_max": max(scales),
        "fp8_GiB": sum(sd[n + ".weight"].numel() for n in layers) / 2**30,
    }
    return policy, sd, info


def load_quantized(R: dict, tcfg: dict, policy, sd: dict):  # noqa: ANN001, ANN201
    """The loader's build: the meta model with the policy's module ops, then
    load_state_dict(strict=False, assign=True) of the converted state dict; every parameter must
    be assigned (the loader would otherwise hand back a model with meta tensors)."""
    model = R["create_meta_model"](R["LTXModelConfigurator"], {"config": {"transformer": tcfg}}, policy.module_ops)
    res = model.load_state_dict(sd, strict=False, assign=True)
    if res.unexpected_keys:
        raise RuntimeError(f"converted state dict has keys the quantized model lacks: {res.unexpected_keys[:8]}")
    left = [n for n, p in model.named_parameters() if p.is_meta] + [n for n, b in model.named_buffers() if b.is_meta]
    if left or res.missing_keys:
        raise RuntimeError(f"parameters left unassigned: {(left or res.missing_keys)[:8]}")
    return model.to(bo.DEV)


def check_layers(model, policy: str, layers: list[str]) -> int:  # noqa: ANN001
    """The quantized model holds exactly `layers` in the policy's module type with e4m3 weights."""
    import torch
    from ltx_core.quantization.fp8_cast import Fp8CastLinear
    from ltx_core.quantization.fp8_scaled_mm import FP8Linear

    cls = Fp8CastLinear if policy == "fp8-cast" else FP8Linear
    got = sorted(n for n, m in model.named_modules() if isinstance(m, cls))
    if got != sorted(layers):
        raise RuntimeError(f"{cls.__name__} set differs from the expected Linears: {len(got)} vs {len(layers)}")
    bad = [n for n in got if model.get_submodule(n).weight.dtype != torch.float8_e4m3fn]
    if bad:
        raise RuntimeError(f"{cls.__name__} without an e4m3 weight: {bad[:8]}")
    return len(got)


# --------------------------------------------------------------------------------------------
# bf16 reference pass: outputs for the error check and input amax for the calibration
# --------------------------------------------------------------------------------------------
REF_CACHE: dict = {"outputs": {}, "amax": None}


def size_inputs(R: dict, w: int, h: int) -> tuple[dict, int]:
    """The inputs and step index bench_official.run_transformer_sizes uses for this size."""
    stage1 = w == 768
    sigmas = R["DISTILLED_SIGMAS"] if stage1 else R["STAGE_2_DISTILLED_SIGMAS"]
    step_idx = 6 if stage1 else 1
    return bo.build_inputs(R, w, h, sigmas), step_idx


def run_capturing(R: dict, model, x0, w: int, h: int) -> list:  # noqa: ANN001
    """One step; returns the transformer's velocity outputs (video, audio) and the step's x0."""
    import torch

    captured: list = []
    handle = model.register_forward_hook(lambda m, i, o: captured.append(o))
    try:
        inp, step_idx = size_inputs(R, w, h)
        out = bo.make_step(R, x0, inp, step_idx)()
        torch.cuda.synchronize()
    finally:
        handle.remove()
    if len(captured) != 1:
        raise RuntimeError(f"expected one transformer call per step, saw {len(captured)}")
    vel = [t.float().clone() if t is not None else None for t in captured[0]]
    x0s = [getattr(o, "denoised", o) if o is not None else None for o in out]
    x0s = [t.float().clone() if t is not None else None for t in x0s]
    del inp, out
    return vel + x0s


OUTPUT_NAMES = ("velocity video", "velocity audio", "x0 video", "x0 audio")


def bf16_reference(R: dict, model, x0, calibrate: list[str] | None) -> None:  # noqa: ANN001
    """Fills REF_CACHE for every size (and the amax of `calibrate`'s inputs when given)."""
    import torch

    need_out = [s for s in bo.SIZES if s[0] not in REF_CACHE["outputs"]]
    if calibrate is None and not need_out:
        return
    handles, amax = [], {}
    if calibrate is not None:
        for n in calibrate:
            amax[n] = torch.zeros((), dtype=torch.float32, device=bo.DEV)

            def pre(mod, args, _n=n):  # noqa: ANN001, ANN202
                amax[_n] = torch.maximum(amax[_n], args[0].detach().abs().amax().float())

            handles.append(model.get_submodule(n).register_forward_pre_hook(pre))
    try:
        with torch.inference_mode():
            for label, w, h in (bo.SIZES if calibrate is not None else need_out):
                t0 = time.time()
                REF_CACHE["outputs"][label] = run_capturing(R, model, x0, w, h)
                log(f"  bf16 reference step {label}{' + calibration hooks' if calibrate else ''}: "
                    f"{time.time() - t0:.1f} s (t={elapsed():.0f} s)")
    finally:
        for hd in handles:
            hd.remove()
    if calibrate is not None:
        REF_CACHE["amax"] = {n: float(v) for n, v in amax.items()}
        bad = [n for n, v in REF_CACHE["amax"].items() if not math.isfinite(v) or v <= 0]
        if bad:
            raise RuntimeError(f"calibration gave a non-finite or zero amax for {bad[:8]}")


def rel_l2(a, b) -> float:  # noqa: ANN001
    import torch

    return float(torch.linalg.vector_norm((a - b).double()) / torch.linalg.vector_norm(b.double()).clamp_min(1e-30))


def quality(R: dict, model, x0) -> dict:  # noqa: ANN001
    import torch

    res = {}
    with torch.inference_mode():
        for label, w, h in bo.SIZES:
            ref = REF_CACHE["outputs"].get(label)
            if ref is None:
                continue
            got = run_capturing(R, model, x0, w, h)
            r = {}
            for name, g, e in zip(OUTPUT_NAMES, got, ref):
                if g is not None and e is not None:
                    r[name] = rel_l2(g, e)
                    if not math.isfinite(float(g.abs().max())):
                        r[name + " non-finite"] = True
            res[label] = r
            log(f"  rel L2 vs bf16 {label}: " + ", ".join(f"{k} {v:.4g}" for k, v in r.items()))
            del got
    return res


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------
def section(R: dict, policy: str, mode: str, *, profile: bool, check_quality: bool, folder: str) -> dict:
    import torch

    tcfg = bo.LTX23_TRANSFORMER
    name = f"LTX-2.3 22B {policy}"
    bo.free_cuda()
    log(f"  (GPU memory allocated before build: {bo.fmt_gib(torch.cuda.memory_allocated())})")
    t0 = time.time()
    model, x0 = bo.build_transformer(R, tcfg)
    torch.cuda.synchronize()
    log(f"  bf16 model built in {time.time() - t0:.1f} s, "
        f"{torch.cuda.memory_allocated() / 2**30:.2f} GiB (t={elapsed():.0f} s)")
    layers = cast_linear_names(R, tcfg)
    want_quality = check_quality and mode == "eager"
    if policy == "fp8-scaled-mm" and REF_CACHE["amax"] is None:
        bf16_reference(R, model, x0, calibrate=layers)
    elif want_quality:
        bf16_reference(R, model, x0, calibrate=None)

    t0 = time.time()
    torch.cuda.reset_peak_memory_stats()
    if policy == "fp8-cast":
        pol, sd, qinfo = convert_fp8_cast(model, folder)
    else:
        pol, sd, qinfo = convert_fp8_scaled_mm(model, folder, layers, REF_CACHE["amax"])
    del model, x0  # the bf16 tensors of the quantized Linears go; the others live on in sd
    bo.free_cuda()
    model = load_quantized(R, tcfg, pol, sd)
    del sd
    x0 = R["X0Model"](model).to(bo.DEV).eval()
    qinfo["fp8_linears"] = check_layers(model, policy, layers)
    bo.free_cuda()
    qinfo["quantize_s"] = time.time() - t0
    qinfo["quantize_peak_allocated_GiB"] = torch.cuda.max_memory_allocated() / 2**30
    desc = bo.describe_model(model)
    desc["weights_allocated_GiB"] = torch.cuda.memory_allocated() / 2**30
    log(f"\n=== {name}: quantized in {qinfo['quantize_s']:.1f} s, {qinfo['fp8_linears']} FP8 Linears, "
        f"weights {desc['weights_allocated_GiB']:.2f} GiB on GPU (t={elapsed():.0f} s)")
    for k, v in qinfo.items():
        log(f"  {k}: {v}")
    res: dict = {"model": desc, "quantization": qinfo}

    if want_quality:
        res["rel_l2_vs_bf16"] = quality(R, model, x0)

    label = None
    if mode != "eager":
        from ltx_core.model.transformer.compiling import CompilationConfig, compile_transformer

        cfg = CompilationConfig(capture=(mode == "capture"))
        log(f"\n=== {name} torch.compile via ltx_core compile_transformer({cfg})")
        model = compile_transformer(model, cfg)
        x0 = R["X0Model"](model).to(bo.DEV).eval()
        res["compilation_config"] = repr(cfg)
        label = MODE_LABEL[mode]
    with torch.inference_mode():
        res.update(bo.run_transformer_sizes(R, name, tcfg, x0, model, count=False,
                                            profile=profile and mode == "eager", compiled=label))
    del model, x0
    if mode != "eager":
        torch._dynamo.reset()
    bo.free_cuda()
    return res


def parse_skip(text: str) -> set[str]:
    allowed = set(POLICIES) | set(MODES) | {"profile", "quality"}
    skip = set(filter(None, (s.strip() for s in text.split(","))))
    unknown = skip - allowed
    if unknown:
        raise SystemExit(f"--skip: unknown item(s) {sorted(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return skip


def summary() -> None:
    log("\n================ SUMMARY (ms per denoising forward, median of 5 after 2 warm-ups) ================")
    for title, sec in RESULTS["sections"].items():
        if not isinstance(sec, dict) or "error" in sec:
            log(f"{title}: {sec if not isinstance(sec, dict) else 'FAILED'}")
            continue
        for size_label, _, _ in bo.SIZES:
            r = sec.get(size_label)
            if isinstance(r, dict) and "median_ms" in r:
                first = r.get("first_call_s (compile/capture)")
                extra = f", first call {first:.1f} s" if first is not None else ""
                q = sec.get("rel_l2_vs_bf16", {}).get(size_label, {})
                if "velocity video" in q:
                    extra += f", rel L2 vs bf16 {q['velocity video']:.3g}"
                log(f"{title:40s} {size_label:18s} {r['median_ms']:9.1f} ms  {r['achieved_TFLOPs']:5.0f} TFLOP/s  "
                    f"peak {r['peak_allocated_GiB']:.1f} GiB{extra}")
    log(f"total wall {elapsed():.0f} s")


def main() -> None:
    global _txt, bo
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--official-bench", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "bench_official.py"),
                    help="path of bench_official.py (imported as a module; default: the copy next to this file)")
    ap.add_argument("--ref", default=None,
                    help="unpacked LTX-2 v1.2.0 tree (default: $LTX_REF, else bench_official.py's default)")
    ap.add_argument("--budget", type=float, default=float(os.environ.get("BENCH_BUDGET_S", 480)),
                    help="seconds from start; a section starts only if its estimate fits, and an alarm "
                         f"stops the run {HARD_LIMIT_MARGIN_S} s after (default $BENCH_BUDGET_S or 480)")
    ap.add_argument("--skip", default="",
                    help="comma list of fp8-scaled-mm,fp8-cast (policies), eager,compiled,capture (modes), "
                         "profile (eager kernel breakdown), quality (rel L2 vs bf16)")
    args = ap.parse_args()
    skip = parse_skip(args.skip)

    os.makedirs(OUT_DIR, exist_ok=True)
    _txt = open(TXT_PATH, "w")
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(max(1, int(args.budget - elapsed() + HARD_LIMIT_MARGIN_S)))
    RESULTS["args"] = vars(args)
    try:
        bo = import_official_bench(os.path.abspath(args.official_bench), args.ref)
    except Exception:  # noqa: BLE001
        tb = traceback.format_exc()
        log(f"cannot import bench_official.py:\n{tb}")
        RESULTS["error"] = tb[-3000:]
        save_json()
        sys.exit(1)

    import torch

    log("# Official LTX-2 v1.2.0 (ltx-core) 22B AV transformer step under fp8-cast / fp8-scaled-mm, "
        "random bf16 weights quantized by the reference's policies")
    log(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, reference {bo.REF}, official bench {args.official_bench}")
    log(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    log(f"GPU {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}, "
        f"memory {bo.fmt_gib(torch.cuda.get_device_properties(0).total_memory)}")
    RESULTS["env"] = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                      "gpu": torch.cuda.get_device_name(0),
                      "capability": torch.cuda.get_device_capability(0), "reference": bo.REF,
                      "stubbed": getattr(bo, "STUBBED", None)}
    try:
        R = bo.import_reference()
    except Exception:  # noqa: BLE001
        tb = traceback.format_exc()
        log(f"reference import failed:\n{tb}")
        RESULTS["error"] = tb[-3000:]
        save_json()
        sys.exit(1)
    log(f"pipeline helpers: {R['pipelines_import']}")
    RESULTS["env"]["pipelines_import"] = R["pipelines_import"]
    try:  # the same attention backend as the bf16 run makes the two comparable
        attn = R["attention_label"](R["automatic_attention"]())
        log(f"attention backend (AUTOMATIC): {attn}")
        RESULTS["env"]["attention"] = attn
    except Exception as e:  # noqa: BLE001
        log(f"attention backend: unknown ({type(e).__name__}: {e})")
    save_json()

    try:
        run_sections(R, args, skip)
    except HardTimeLimit as e:  # between sections: the remaining ones never started
        log(f"\n--- {e}: remaining sections not run")
    finally:
        signal.alarm(0)
        summary()
        save_json()


def run_sections(R: dict, args: argparse.Namespace, skip: set[str]) -> None:
    folder = tempfile.mkdtemp(prefix="quantized_step_headers_")
    stop = False
    for policy, mode in SECTION_ORDER:
        title = f"LTX-2.3 {policy} {MODE_LABEL[mode]}"
        if policy in skip or mode in skip:
            log(f"\n--- {title}: skipped by --skip")
            RESULTS["sections"][title] = "skipped (--skip)"
            continue
        left = args.budget - elapsed()
        if stop or left < NEED_S[mode]:
            why = "the hard time limit was hit" if stop else f"time budget: {left:.0f} s left, {NEED_S[mode]} s needed"
            log(f"\n--- {title}: SKIPPED, {why}")
            RESULTS["sections"][title] = f"skipped ({why})"
            save_json()
            continue
        log(f"\n--- {title} (t={elapsed():.0f} s)")
        try:
            RESULTS["sections"][title] = section(R, policy, mode, profile="profile" not in skip,
                                                 check_quality="quality" not in skip, folder=folder)
        except HardTimeLimit as e:
            log(f"--- {title} STOPPED: {e}")
            RESULTS["sections"][title] = {"error": f"stopped: {e}"}
            stop = True
        except Exception:  # noqa: BLE001
            tb = traceback.format_exc()
            log(f"--- {title} FAILED:\n{tb}")
            RESULTS["sections"][title] = {"error": tb[-3000:]}
        try:
            gc.collect()
            bo.free_cuda()
        except (Exception, HardTimeLimit):  # noqa: BLE001
            log("  free_cuda after the section failed:\n" + traceback.format_exc())
        save_json()


if __name__ == "__main__":
    main()
