#!/usr/bin/env python3
"""Anchor benchmark: OFFICIAL LTX-2 v1.2.0 (ltx-core) LTX-2.5 diffusion video decoder on one GPU.

Times ``DiffusionVideoDecoder.decode_video`` (the port of ``NADiffusionDecoder``) on a
121-frame 1536x1024 clip (latent [1,128,16,32,48]) at full size, random bf16 weights.

How the decoder is built (as ``ltx_pipelines.utils.blocks.VideoDecoder`` does it, minus the
checkpoint file that does not exist here):
  * config = the shipped LTX-2.5 ``config.vae`` (see ../golden/README-ltx25.md and
    shared/docs/reference-map.md 4.4): CausalDiffusionVAE / NADiffusionDecoder, stage_channels
    [2048,1024,512,512,256], depths [4,6,4,2,8], kernels (3,7,7)(3,7,7)(3,5,5)(3,5,5)(11,11,11),
    stage5_kernel (11,11,11), head_dim 64, t_emb_dim absent (-> 384), 1 step, x0, scale 1000;
  * ``create_meta_model(VideoDecoderConfigurator, metadata, (build_diffvae_mode_op(
    DiffVAEMode.CHUNKED_EAGER, None),))`` - the pipelines' default ``diffvae_optimization``;
    the op resolves the attention backend for this host (``resolve_attention_for_host``);
  * meta params/buffers replaced by random bf16 CUDA tensors with ``load_state_dict(assign=True)``
    (what SingleGPUModelBuilder does with the file's tensors), then ``.to(cuda)``; the
    non-persistent CPU buffers (RoPE inverse frequencies, default timesteps) stay as built.
Tiling = the pipelines' default ``AUTO_TILING``: ``tiling_config_for_vae`` ->
``recommended_decode_tiling_config(**diffvae_tiling_geometry_from_vae_config(vae), height, width,
num_frames, mode=CHUNKED_EAGER, free_bytes=cuda_activation_budget_bytes(dev), model_bytes=<decoder
bf16 bytes>)`` evaluated before the decoder is materialized (the pipeline builds the decoder
lazily at decode time).

Usage (CUDA machine with PyTorch):  LTX_REF=/path/to/LTX-2 python3 bench_official_diffdec.py
Writes $OUT/bench_official_diffdec.txt (+ .json), or <repo>/out/ when OUT is unset.
Reference source: $LTX_REF or <repo>/.ref/LTX-2.

Copied into ltx.cpp as tools/bench/bench_official_diffdec.py from the project's shared tools
(shared/tools/bench_official_diffdec.py, the anchor of `ltx bench diffdec`); the only changes are
this note and the two path defaults: the reference source defaults to <repo>/.ref/LTX-2 and the
results go to <repo>/out/ (both git-ignored) when LTX_REF / OUT are unset.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import logging
import math
import os
import statistics
import sys
import time
import traceback
import types
from unittest import mock

T_START = time.time()
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", 430))

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.environ.get("OUT") or os.path.join(REPO_ROOT, "out")
os.makedirs(OUT_DIR, exist_ok=True)
TXT_PATH = os.path.join(OUT_DIR, "bench_official_diffdec.txt")
JSON_PATH = os.path.join(OUT_DIR, "bench_official_diffdec.json")
_txt = open(TXT_PATH, "w")
RESULTS: dict = {"runs": []}


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
# Stubs for media packages the reference imports at module level (same as bench_official.py).
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
        except Exception as e:  # noqa: BLE001
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
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="[%(levelname)s %(name)s] %(message)s")

import torch  # noqa: E402

DEV = torch.device("cuda")
DTYPE = torch.bfloat16

# --------------------------------------------------------------------------------------------
# Shipped LTX-2.5 video-VAE config ("config" -> "vae"), decoder part (encoder omitted: decode only).
# Key order / names as in gen_ltx25.decoder_section(shipped=True); real values from the public
# header dumps cited in shared/golden/README-ltx25.md; t_emb_dim absent in the real file (-> 384).
# --------------------------------------------------------------------------------------------
DECODER_CFG = {
    "_class_name": "NADiffusionDecoder",
    "in_channels": 128,
    "out_channels": 3,
    "patch_size": 4,
    "head_dim": 64,
    "stage_channels": [2048, 1024, 512, 512, 256],
    "stage_depths": [4, 6, 4, 2, 8],
    "stage_kernels": [[3, 7, 7], [3, 7, 7], [3, 5, 5], [3, 5, 5], [11, 11, 11]],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 2]],
    "spatial_padding_mode": "zeros",
    "resampler_kind": "linear",
    "stage5_kernel": [11, 11, 11],
    "timestep_scale_multiplier": 1000.0,
    "default_num_inference_steps": 1,
}
VAE_CFG = {
    "_class_name": "CausalDiffusionVAE",
    "dims": 3,
    "decoder": DECODER_CFG,
    "model_output_type": "x0",
    "spatial_padding_mode": "zeros",
}
METADATA = {"config": {"vae": VAE_CFG}, "model_version": "2.5.0"}

HEIGHT, WIDTH, FRAMES = 1024, 1536, 121


def latent_shape(frames: int) -> tuple[int, int, int, int, int]:
    return (1, 128, (frames - 1) // 8 + 1, HEIGHT // 32, WIDTH // 32)


# --------------------------------------------------------------------------------------------
# Instrumentation: CUDA events around the decoder's stage entry points and every NA call
# (events are asynchronous: no host sync inside the timed region).
# --------------------------------------------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.active = False
        self.verbose = False
        self.t0 = 0.0
        self.spans: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self.shapes: list[str] = []

    def reset(self, verbose: bool) -> None:
        self.spans = []
        self.shapes = []
        self.verbose = verbose
        self.t0 = time.time()

    def span(self, label: str):  # noqa: ANN201
        rec = self

        class _Ctx:
            def __enter__(self_inner):  # noqa: ANN204, N805
                self_inner.s = torch.cuda.Event(enable_timing=True)
                self_inner.e = torch.cuda.Event(enable_timing=True)
                self_inner.s.record()
                return self_inner

            def __exit__(self_inner, *exc):  # noqa: ANN204, N805
                self_inner.e.record()
                rec.spans.append((label, self_inner.s, self_inner.e))
                return False

        return _Ctx()

    def totals(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for label, s, e in self.spans:
            d = out.setdefault(label, {"calls": 0, "ms": 0.0})
            d["calls"] += 1
            d["ms"] += s.elapsed_time(e)
        for d in out.values():
            d["ms"] = round(d["ms"], 2)
        return out


REC = Recorder()


def instrument(dec) -> None:  # noqa: ANN001
    from ltx_core.model.video_vae.transformer.attention import NeighborhoodAttention3D

    def wrap_method(name: str, label: str) -> None:
        orig = getattr(dec, name)

        def wrapped(*a, **k):  # noqa: ANN002, ANN003, ANN202
            if REC.verbose:
                shp = [tuple(x.shape) for x in a if isinstance(x, torch.Tensor)]
                log(f"    [progress t+{time.time() - REC.t0:6.1f}s host] {label} inputs {shp}")
            with REC.span(label):
                return orig(*a, **k)

        setattr(dec, name, wrapped)

    wrap_method("forward_stages_1_to_3", "stages_1_3 (det stages 1-3 incl. upsamples)")
    wrap_method("forward_stage_4", "stage_4 (det stage 4 blocks, deferred upsample)")
    wrap_method("forward_diff_step_deferred", "stage_5 (8 diffusion blocks + out)")

    class NAWrap:
        def __init__(self, inner, label: str) -> None:  # noqa: ANN001
            self.inner = inner
            self.label = label

        def __call__(self, attn, q, k, v):  # noqa: ANN001, ANN204
            with REC.span(self.label):
                return self.inner(attn, q, k, v)

    for name, m in dec.named_modules():
        if isinstance(m, NeighborhoodAttention3D):
            where = "stage5" if name.startswith("diff_blocks") else f"det{name.split('.')[1]}"
            lbl = f"NA {where} K={tuple(m.kernel_size)} [{type(m.attention_function).__name__}]"
            m.attention_function = NAWrap(m.attention_function, lbl)


# --------------------------------------------------------------------------------------------
def main() -> None:  # noqa: PLR0915
    import triton

    log("# Official LTX-2 v1.2.0 (ltx-core) LTX-2.5 DIFFUSION video decoder benchmark, random bf16 weights")
    log(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, reference {REF}")
    log(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}, triton {triton.__version__}")
    log(f"GPU {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}, "
        f"memory {torch.cuda.get_device_properties(0).total_memory / 2**30:.2f} GiB")
    log(f"stubbed (missing) modules: {STUBBED or 'none'}")
    tcache = os.environ.get("TRITON_CACHE_DIR") or os.path.expanduser("~/.triton/cache")
    n_cache = sum(len(f) for _, _, f in os.walk(tcache)) if os.path.isdir(tcache) else 0
    log(f"triton cache {tcache}: {n_cache} files before the first decode")
    RESULTS["env"] = {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
                      "gpu": torch.cuda.get_device_name(0), "stubbed": STUBBED, "triton_cache_files_before": n_cache}

    from ltx_core.devices import cuda_activation_budget_bytes
    from ltx_core.loader.helpers import create_meta_model
    from ltx_core.model.video_vae import diffusion_tiling
    from ltx_core.model.video_vae.model_configurator import (
        VideoDecoderConfigurator,
        diffvae_tiling_geometry_from_vae_config,
    )
    from ltx_core.model.video_vae.transformer.apply import build_diffvae_mode_op, resolve_attention_for_host
    from ltx_core.model.video_vae.transformer.attention import natten_available
    from ltx_core.model.video_vae.transformer.config import DiffVAEMode
    from ltx_core.model.video_vae.transformer.fallback_na import triton_na_available

    mode = DiffVAEMode.CHUNKED_EAGER  # ltx_pipelines default diffvae_optimization
    resolved = resolve_attention_for_host(mode.resolve())
    log(f"natten_available={natten_available()}, triton_na_available={triton_na_available()}")
    log(f"diffvae_optimization={mode.value} -> resolve()={mode.resolve()}")
    log(f"  resolve_attention_for_host -> {resolved}")
    RESULTS["mode"] = {"mode": mode.value, "resolved": str(resolved), "natten": natten_available(),
                       "triton_na": triton_na_available()}
    log("config.vae = " + json.dumps(VAE_CFG))
    RESULTS["config_vae"] = VAE_CFG

    # ---- meta model (as VideoDecoder's Builder: module op applied on the meta model)
    op = build_diffvae_mode_op(mode, None)  # VideoDecoder passes CompilationConfig() only if compile_blocks
    t0 = time.time()
    dec = create_meta_model(VideoDecoderConfigurator, METADATA, (op,))
    log(f"meta model {type(dec).__name__} built in {time.time() - t0:.1f} s")
    params = dict(dec.named_parameters())  # deduplicated (stage4_upsample shares upsamples.3)
    n_params = sum(p.numel() for p in params.values())
    groups: dict[str, int] = {}
    for n, p in params.items():
        key = ".".join(n.split(".")[:2]) if n.startswith(("det_stages", "upsamples")) else n.split(".")[0]
        groups[key] = groups.get(key, 0) + p.numel()
    model_bytes = n_params * 2 + sum(b.numel() * 2 for n, b in dec.named_buffers() if "per_channel" in n)
    log(f"decoder parameters: {n_params} ({n_params / 1e6:.1f} M); bf16 weight bytes {model_bytes / 2**30:.3f} GiB")
    for k, v in groups.items():
        log(f"  {k}: {v / 1e6:.2f} M")
    RESULTS["params"] = {"total": n_params, "groups": groups, "model_bytes": model_bytes}

    # ---- default pipeline tiling (AUTO_TILING -> tiling_config_for_vae), decoder not yet on GPU
    geometry = diffvae_tiling_geometry_from_vae_config(VAE_CFG)
    free_bytes = cuda_activation_budget_bytes(DEV)
    log(f"tiling geometry: {geometry}")
    log(f"free_bytes (cuda_activation_budget_bytes, before decoder build) = {free_bytes / 2**30:.2f} GiB")

    def auto_tiling(frames: int, free: int):  # noqa: ANN202
        return diffusion_tiling.recommended_decode_tiling_config(
            **geometry, height=HEIGHT, width=WIDTH, num_frames=frames, mode=mode, free_bytes=free,
            model_bytes=model_bytes)

    tilings = {f: auto_tiling(f, free_bytes) for f in (25, 49, FRAMES)}
    for f, tc in tilings.items():
        log(f"  AUTO_TILING for {f}x{HEIGHT}x{WIDTH}: {tc}")
    # what the same rule picks if a resident 22B bf16 transformer (~35.4 GiB) shared the GPU
    alt = auto_tiling(FRAMES, max(0, free_bytes - int(35.4 * 2**30)))
    log(f"  (for reference, free_bytes - 35.4 GiB -> {alt})")
    RESULTS["tiling"] = {str(f): repr(tc) for f, tc in tilings.items()}
    RESULTS["free_bytes"] = free_bytes

    # ---- materialize: random bf16 weights on CUDA, assigned like the builder's load_state_dict
    t0 = time.time()
    g = torch.Generator(device=DEV).manual_seed(1)
    sd: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for n, p in params.items():
            if not p.is_meta:
                continue
            if p.ndim >= 2:
                t = torch.empty(p.shape, device=DEV, dtype=DTYPE)
                std = 0.02 if n.endswith("scale_shift_table") else 1.0 / math.sqrt(p[0].numel())
                t.normal_(0.0, std, generator=g)
            elif n.endswith("weight"):
                t = torch.ones(p.shape, device=DEV, dtype=DTYPE)
            else:
                t = torch.zeros(p.shape, device=DEV, dtype=DTYPE)
            sd[n] = t
        for n, b in dec.named_buffers():
            if b.is_meta:
                sd[n] = (torch.ones if "std" in n else torch.zeros)(b.shape, device=DEV, dtype=DTYPE)
    dec.load_state_dict(sd, strict=False, assign=True)
    left = [n for n, t in list(dec.named_parameters()) + list(dec.named_buffers()) if t.is_meta]
    if left:
        raise RuntimeError(f"still on meta: {left[:8]}")
    dec = dec.to(DEV).eval()
    del sd
    torch.cuda.synchronize()
    w_alloc = torch.cuda.memory_allocated()
    log(f"materialized in {time.time() - t0:.1f} s; GPU allocated after build {w_alloc / 2**30:.2f} GiB")
    det_attn = dec.det_stages[0][0].attn
    d5 = dec.diff_blocks[0]
    backend = {
        "det_stage_attention_function": type(det_attn.attention_function).__name__,
        "stage5_attention_function": type(d5.attn.attention_function).__name__,
        "stage5_block_class": type(d5).__name__,
        "stage5_w_chunks": int(d5.attn.w_chunks),
        "stage5_rope_num_tiles": int(d5.attn.rope_num_tiles),
        "det_rope_num_tiles": int(det_attn.rope_num_tiles),
        "deferred_stage4_upsample": bool(dec.deferred_stage4_upsample),
        "mark_dynamic_shapes": bool(dec.mark_dynamic_shapes),
        "tile_min_sizes(s4)": dec.tile_min_sizes,
        "tile_halos": dec.tile_halos,
        "stage_min_tile_sizes(latent)": dec.stage_min_tile_sizes,
        "default_inference_timesteps": dec.default_inference_timesteps.tolist(),
        "model_output_type": dec.model_output_type,
        "timestep_scale_multiplier": dec.timestep_scale_multiplier,
        "rope_inv_t dtype/device": f"{det_attn.rope_inv_t.dtype}/{det_attn.rope_inv_t.device}",
    }
    for k, v in backend.items():
        log(f"  {k}: {v}")
    RESULTS["backend"] = backend
    instrument(dec)
    save_json()

    def schedule(frames: int, tiling) -> list[dict]:  # noqa: ANN001
        _, _, t, h, w = latent_shape(frames)
        strides = [tuple(u.stride) for u in dec.upsamples]
        s4 = diffusion_tiling.stage4_thw_from_latent(strides, t, h, w, drop_leading_frame=True)
        tiles = diffusion_tiling.prepare_tile_schedule(
            torch.Size([1, 128, *s4]), tiling, upsample3_stride=tuple(dec.upsamples[3].stride),
            patch_size=dec.patch_size, min_tile_size=dec.tile_min_sizes, tile_halos=dec.tile_halos)
        return [{"in": str(tl.in_coords[1:4]), "out": str(tl.out_coords[2:5])} for tl in tiles]

    # ---- timed decodes
    def run(label: str, frames: int, verbose: bool) -> dict:
        tiling = tilings[frames]
        shape = latent_shape(frames)
        gl = torch.Generator(device=DEV).manual_seed(7)
        latent = torch.randn(shape, generator=gl, device=DEV, dtype=DTYPE)
        gen = torch.Generator(device=DEV).manual_seed(42)  # pipeline: torch.Generator(device).manual_seed(seed)
        tiles = schedule(frames, tiling)
        log(f"\n--- {label}: latent {shape} -> {frames}x{HEIGHT}x{WIDTH}, tiling {tiling}, {len(tiles)} tile(s)"
            f" (t={elapsed():.0f} s)")
        if verbose:
            for tl in tiles:
                log(f"    tile {tl}")
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        REC.reset(verbose)
        chunks = []
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        w0 = time.perf_counter()
        ev0.record()
        with torch.inference_mode():
            for chunk in dec.decode_video(latent, tiling, gen):  # [f, h, w, c] in [0, 1]
                chunks.append(chunk)
        ev1.record()
        torch.cuda.synchronize()
        wall = time.perf_counter() - w0
        gpu_ms = ev0.elapsed_time(ev1)
        r = {
            "label": label,
            "frames": frames,
            "latent": shape,
            "tiling": repr(tiling),
            "n_tiles": len(tiles),
            "wall_s": round(wall, 3),
            "gpu_event_ms": round(gpu_ms, 1),
            "peak_allocated_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "peak_reserved_GiB": round(torch.cuda.max_memory_reserved() / 2**30, 2),
            "chunks_frames": [int(c.shape[0]) for c in chunks],
            "out_shape": tuple(chunks[0].shape[1:]) if chunks else None,
            "breakdown_ms": REC.totals(),
        }
        with torch.inference_mode():
            r["out_finite"] = bool(all(torch.isfinite(c).all().item() for c in chunks))
            r["out_mean"] = float(sum(c.float().mean().item() for c in chunks) / max(1, len(chunks)))
        del chunks, latent
        torch.cuda.empty_cache()
        log(f"  wall {wall:.2f} s, GPU events {gpu_ms / 1e3:.2f} s, peak allocated {r['peak_allocated_GiB']} GiB "
            f"(reserved {r['peak_reserved_GiB']} GiB), chunks {r['chunks_frames']} frames of {r['out_shape']}, "
            f"finite {r['out_finite']}, mean {r['out_mean']:.4f}")
        for k, v in r["breakdown_ms"].items():
            log(f"    {k:60s} {v['calls']:3d} calls {v['ms'] / 1e3:8.3f} s")
        RESULTS["runs"].append(r)
        save_json()
        return r

    # 1) short clip first: cold (Triton JIT compile of the na3d variants) + calibration
    try:
        cal = run("calibration 25 frames (cold: includes Triton na3d JIT compile)", 25, verbose=True)
    except Exception:  # noqa: BLE001
        log("calibration FAILED:\n" + traceback.format_exc())
        save_json()
        raise
    est_full = cal["wall_s"] * FRAMES / 25 * 1.15
    log(f"  -> estimated full 121-frame decode <= {est_full:.0f} s (elapsed {elapsed():.0f} s, budget {BUDGET_S:.0f} s)")

    fulls: list[dict] = []
    if elapsed() + est_full < BUDGET_S:
        fulls.append(run("FULL 121 frames #1", FRAMES, verbose=True))
        for i in (2, 3):
            nxt = fulls[-1]["wall_s"] * 1.1 + 5
            if elapsed() + nxt < BUDGET_S:
                fulls.append(run(f"FULL 121 frames #{i}", FRAMES, verbose=False))
            else:
                log(f"  (skipping full run #{i}: {BUDGET_S - elapsed():.0f} s left, need ~{nxt:.0f} s)")
    else:
        est49 = cal["wall_s"] * 49 / 25 * 1.15
        log("  full decode would not fit the time budget")
        if elapsed() + est49 < BUDGET_S:
            run("SHORTER 49 frames", 49, verbose=True)

    log("\n================ SUMMARY ================")
    log(f"decoder params {n_params} ({n_params / 1e6:.1f} M), bf16 weights {w_alloc / 2**30:.2f} GiB on GPU")
    log(f"mode {mode.value} -> attention {resolved.attention.value}, block {resolved.block.value}, "
        f"w_chunks {resolved.w_chunks}, compile {resolved.compile_blocks}")
    for r in RESULTS["runs"]:
        log(f"{r['label']:62s} wall {r['wall_s']:8.2f} s  gpu {r['gpu_event_ms'] / 1e3:8.2f} s  "
            f"peak {r['peak_allocated_GiB']:6.2f} GiB  tiles {r['n_tiles']}")
    if fulls:
        walls = [r["wall_s"] for r in fulls]
        warm = walls[1:] or walls
        RESULTS["full_121"] = {"walls_s": walls, "warm_median_s": statistics.median(warm),
                               "first_includes_compile": False}
        log(f"FULL 121x1024x1536: walls {walls} s; median of warm runs {statistics.median(warm):.2f} s "
            f"(run #1 followed the 25-frame calibration, which absorbed the Triton JIT compile)")
    log(f"total wall {elapsed():.0f} s")
    save_json()


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001
        log("FAILED:\n" + traceback.format_exc())
        save_json()
        sys.exit(1)
