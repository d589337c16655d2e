#!/usr/bin/env python3
"""The OFFICIAL LTX-2.3 pipelines, stage by stage, end to end on one GPU with random weights: what
`ltx bench pipeline` (src/bench/pipeline_bench.cpp) is compared with in the same device run.

What runs: the reference's own pipeline objects (Lightricks LTX-2 v1.2.0, ltx-pipelines'
DistilledPipeline and TI2VidTwoStagesPipeline), constructed and called as their main() does for a
text-to-video clip (no images, no prompt enhancement, AUTO_TILING, bf16), at the ltx23-22b preset's
full size. Nothing of their logic is re-implemented; three seams make it run without model files:

  * Stand-in files, in a temporary folder: the checkpoint (one placeholder tensor; its metadata is
    the preset's config {transformer, vae, audio_vae, vocoder} and model_version), the x2 spatial
    upsampler (its config), and a Gemma root (config.json = the preset's Gemma 3 12B; tokenizer and
    sidecars of tests/fixtures/text_gemma3_root, the demo bundle's tokenizer that ours runs too; a
    placeholder model.safetensors). Every header reader of the reference (detect_params,
    is_diffusion_video_vae, the tiling, GemmaAssets) reads them as real files.
  * Weights: ltx_pipelines.utils.blocks.Builder (the SingleGPUModelBuilder every block builds its
    models with) is a subclass here whose state-dict loader makes random bf16 tensors on the GPU for
    the meta model the builder made (the official configurator and module ops) instead of reading
    them; the rest of build() is the reference's (sd_ops' value operations such as the VAE decoder's
    channels-last weights and Gemma's tied lm_head, load_state_dict(assign=True), .to(device)). The
    blocks build and free their models where the pipeline does (Gemma freed before the embeddings
    processor and the transformer, the transformer rebuilt for stage 2, ...). Every build is
    synchronised and timed, reported on its own, and subtracted from the stage it happens in, as
    ours subtracts its weight synthesis: a stage's time is as if the weights were already in memory.
  * Stages: the pipeline's block attributes (prompt_encoder, image_conditioner, stage / stage_1 /
    stage_2, upsampler, video_decoder, audio_decoder) are wrapped: each call is synchronised,
    timed, its peak allocation read (reset at its start); the denoiser handed to a stage is wrapped
    to time each step. A block that fails (or is --skip'ped) is logged with its traceback, marked
    in the JSON, and replaced by a random stand-in of the right shape (contexts, latents, no frames,
    no audio), so the later stages still run; "context" says whether Gemma's or random contexts
    fed the transformer. The video decode is the official VideoDecoder's iterator, drained here.

Stages (ours' names): text encoding (Gemma 3 12B + the EmbeddingsProcessor; the two-stage pipeline
encodes the prompt and the default negative prompt), image conditioning (the official pipelines
build the video encoder once per stage even without images), stage 1 (distilled: DISTILLED_SIGMAS,
SimpleDenoiser, the Euler loop LTX-2.3 gets; two-stage: LTX2Scheduler steps, FactoryGuidedDenoiser
with the LTX-2.3 defaults of detect_params, 30 steps x 4 guidance passes), upsample, stage 2
(STAGE_2_DISTILLED_SIGMAS at full size, SimpleDenoiser), video decode (the conv VAE decoder with the
pipelines' AUTO_TILING), audio decode (audio VAE decoder + BWE vocoder). End to end = the sum of the
stages. Not run: the MP4 encode (PyAV / FFmpeg are not installed on the GPU machine), the two-stage
pipeline's distilled LoRA (no file; the official fuses it inside the stage-2 build, untimed here
anyway; ours runs without it too).

The configs come from src/bench/presets.cpp (the `ltx23-22b` preset), read at run time by a small
parser (the C++ preset is the source of truth). tools/bench/bench_official.py is imported as a
module (with OUT pointed elsewhere, so its log in $OUT is left alone) for its stubs of the media
packages the reference imports but this run does not use, and for the reference path.

Usage (CUDA machine with PyTorch and transformers; the reference source in $LTX_REF or --ref,
else <repo>/.ref or <repo>/.ref/LTX-2):
  python3 tools/bench/official_pipeline.py [--pipeline distilled|two-stage|both] [--size 1536x1024]
      [--frames 121] [--skip STAGE,...] [--budget S] [--out FILE.json] [--dry-run]
--dry-run parses the preset and the paths and prints the plan without importing torch.
Results: the table on stdout, the JSON in --out (default $OUT/official_pipeline.json, or
<repo>/out/official_pipeline.json when OUT is unset), rewritten after every stage.
"""

from __future__ import annotations

import time

T_START = time.time()

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from unittest import mock  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_official_module import import_bench_official as import_bench_official_module  # noqa: E402
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
PRESETS_CPP = os.path.join(REPO_ROOT, "src", "bench", "presets.cpp")
GEMMA_SIDECARS = os.path.join(REPO_ROOT, "tests", "fixtures", "text_gemma3_root")
PRESET = "ltx23-22b"

# The prompt `ltx bench pipeline` encodes (src/bench/pipeline_bench.cpp); the negative prompt of the
# two-stage pipeline is the reference's default (its CLI's --negative-prompt default).
PROMPT = ("A red fox trots through fresh snow at dawn, its breath steaming in the cold air; "
          "the camera follows at ground level; wind and the crunch of paws on snow.")

# (--skip name, stage name as ours reports it), in pipeline order.
STAGES = [
    ("text", "text encoding"),
    ("image-conditioning", "image conditioning"),
    ("stage1", "stage 1"),
    ("upsample", "upsample"),
    ("stage2", "stage 2"),
    ("video-decode", "video decode"),
    ("audio-decode", "audio decode"),
]
SKIP_ALIASES = {"decode": ("video-decode", "audio-decode")}
# Seconds a pipeline needs on an H100 at 1536x1024x121 (builds included); one starts only when
# that much of --budget is left.
NEED_S = {"distilled": 100, "two-stage": 170}

NOT_RUN = {
    "mp4 encode": "not run: PyAV / FFmpeg are not installed on the GPU machine (the official "
                  "encode_video needs PyAV); ours times it inside its video decode stage (mp4_seconds)",
    "weights": "random bf16 made on the GPU inside the official builders (SingleGPUModelBuilder.build "
               "with a loader that makes tensors instead of reading them); each build is timed, "
               "listed under builds and subtracted from its stage, so no file load is counted",
    "tokenizer": "the demo bundle's Gemma 3 tokenizer (tests/fixtures/text_gemma3_root, as ours); the "
                 "official wrapper pads every prompt to 1024 tokens, so Gemma does a full prompt's work",
}
LORA_NOTE = ("stage 2 runs without the distilled LoRA: no LoRA file exists here (the official fuses it "
             "while building the stage-2 transformer, which is not timed here; ours runs without it too)")


def elapsed() -> float:
    return time.time() - T_START


def free_cuda(bo) -> None:  # noqa: ANN001
    """bench_official's free (gc, synchronize, empty_cache), which may itself raise after a CUDA error."""
    try:
        bo.free_cuda()
    except Exception as e:  # noqa: BLE001
        log(f"  (freeing GPU memory failed: {type(e).__name__}: {e})")


def log(*args: object) -> None:
    print(" ".join(str(a) for a in args), flush=True)


# --------------------------------------------------------------------------------------------
# The preset: src/bench/presets.cpp's JSON strings, as the `ltx23-22b` preset assembles them
# --------------------------------------------------------------------------------------------
def load_preset(path: str, name: str = PRESET) -> dict:
    """Reads the raw-string JSON constants of presets.cpp and the assignments of the preset's
    function body. A body that edits a config in C++ (p.transformer["x"] = ...) is refused: this
    parser would not follow it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    constants = {m.group(1): m.group(2)
                 for m in re.finditer(r'constexpr const char\* (k\w+) = R"json\((.*?)\)json";', text, re.S)}
    fn = name.replace("-", "_")
    m = re.search(r"\nPreset " + re.escape(fn) + r"\(\) \{\n(.*?)\n\}\n", text, re.S)
    if not m:
        raise ValueError(f"{path}: no `Preset {fn}()` function")
    body = m.group(1)
    if re.search(r"\bp\.\w+\[", body) or "Preset p = " in body:
        raise ValueError(f"{path}: {fn}() edits a config or derives from another preset; "
                         "official_pipeline.py's parser reads plain `p.x = nlohmann::json::parse(kName);` only")
    parts = {}
    for field, const in re.findall(r"\bp\.(\w+) = nlohmann::json::parse\((k\w+)\);", body):
        if const not in constants:
            raise ValueError(f"{path}: {fn}() parses {const}, which is not a raw-string constant of the file")
        parts[field] = json.loads(constants[const])
    for field in ("transformer", "vae", "gemma", "audio", "upsampler"):
        if field not in parts:
            raise ValueError(f"{path}: {fn}() sets no p.{field}; the pipelines need it")
    version = re.search(r'\bp\.model_version = "([^"]*)";', body)
    frames = re.search(r"\bp\.frames = (\d+);", body)
    tokens = re.search(r"\bp\.text_tokens = (\d+);", body)
    if not version:
        raise ValueError(f"{path}: {fn}() sets no p.model_version")
    audio = parts["audio"]
    if set(audio) != {"audio_vae", "vocoder"}:
        raise ValueError(f"{path}: the audio config of {fn}() has {sorted(audio)}, expected audio_vae and vocoder")
    return {
        "name": name,
        # The checkpoint metadata's "config", as the published LTX-2.3 files carry it.
        "checkpoint_config": {"transformer": parts["transformer"], "vae": parts["vae"], **audio},
        "gemma": parts["gemma"],
        "upsampler": parts["upsampler"],
        "model_version": version.group(1),
        "frames": int(frames.group(1)) if frames else None,
        "text_tokens": int(tokens.group(1)) if tokens else None,
    }


def parse_size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"--size {text}: expected WIDTHxHEIGHT, e.g. 1536x1024")
    w, h = int(m.group(1)), int(m.group(2))
    if w % 64 or h % 64 or w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"--size {text}: the two-stage pipelines need multiples of 64")
    return w, h


def parse_skip(text: str) -> set[str]:
    names = {k for k, _ in STAGES}
    out: set[str] = set()
    for item in filter(None, (s.strip() for s in text.split(","))):
        if item in SKIP_ALIASES:
            out.update(SKIP_ALIASES[item])
        elif item in names:
            out.add(item)
        else:
            raise argparse.ArgumentTypeError(
                f"--skip {item}: unknown stage; choose from {', '.join(sorted(names | set(SKIP_ALIASES)))}")
    return out


def resolve_ref(arg: str | None) -> str:
    candidates = [arg] if arg else ([os.environ["LTX_REF"]] if os.environ.get("LTX_REF") else
                                    [os.path.join(REPO_ROOT, ".ref"), os.path.join(REPO_ROOT, ".ref", "LTX-2")])
    for c in candidates:
        if os.path.isdir(os.path.join(c, "packages", "ltx-core", "src")) and \
                os.path.isdir(os.path.join(c, "packages", "ltx-pipelines", "src")):
            return os.path.abspath(c)
    raise SystemExit(f"official_pipeline: no reference source (packages/ltx-core/src and packages/ltx-pipelines/src) "
                     f"under {' or '.join(candidates)}; pass --ref DIR or set LTX_REF to an unpacked LTX-2 v1.2.0 tree")


def reference_versions(ref: str) -> dict:
    out = {"path": ref}
    for pkg in ("ltx-core", "ltx-pipelines"):
        try:
            with open(os.path.join(ref, "packages", pkg, "pyproject.toml"), encoding="utf-8") as f:
                m = re.search(r'^version = "([^"]+)"', f.read(), re.M)
            out[pkg] = m.group(1) if m else "unknown"
        except OSError as e:
            out[pkg] = f"unreadable ({e})"
    return out


# --------------------------------------------------------------------------------------------
# bench_official.py as a module: its media stubs and the reference on sys.path
# --------------------------------------------------------------------------------------------
def import_bench_official(ref: str):  # noqa: ANN201
    """Imports bench_official.py without letting it touch $OUT: at import it opens
    $OUT/bench_official.txt for writing."""
    os.environ["LTX_REF"] = ref
    return import_bench_official_module(os.path.join(HERE, "bench_official.py"), ("STUBBED", "REF", "free_cuda"),
                                        "official_pipeline_import_")


def import_reference() -> SimpleNamespace:
    """Every reference name this script uses, in one place (each import is the reference's own
    module path, as its pipelines import it)."""
    from ltx_core.duration_head import DurationHeadConfigurator
    from ltx_core.loader.primitives import StateDict
    from ltx_core.loader.sft_loader import SafetensorsModelStateDictLoader
    from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
    from ltx_core.model.video_vae import AUTO_TILING
    from ltx_core.text_encoders.gemma.embeddings_processor import EmbeddingsProcessorOutput
    from ltx_core.text_encoders.gemma.gemma_assets import TOKENIZER_MAX_LENGTH
    from ltx_core.types import VIDEO_SCALE_FACTORS, AudioLatentShape, VideoLatentShape, VideoPixelShape
    from ltx_pipelines.distilled import DistilledPipeline
    from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline
    from ltx_pipelines.utils import blocks, samplers
    from ltx_pipelines.utils.constants import DEFAULT_NEGATIVE_PROMPT, detect_params
    from ltx_pipelines.utils.model_paths import ModelPaths

    return SimpleNamespace(
        DurationHeadConfigurator=DurationHeadConfigurator,
        StateDict=StateDict,
        SafetensorsModelStateDictLoader=SafetensorsModelStateDictLoader,
        SingleGPUModelBuilder=SingleGPUModelBuilder,
        AUTO_TILING=AUTO_TILING,
        EmbeddingsProcessorOutput=EmbeddingsProcessorOutput,
        TOKENIZER_MAX_LENGTH=TOKENIZER_MAX_LENGTH,
        VIDEO_SCALE_FACTORS=VIDEO_SCALE_FACTORS,
        AudioLatentShape=AudioLatentShape,
        VideoLatentShape=VideoLatentShape,
        VideoPixelShape=VideoPixelShape,
        DistilledPipeline=DistilledPipeline,
        TI2VidTwoStagesPipeline=TI2VidTwoStagesPipeline,
        blocks=blocks,
        samplers=samplers,
        DEFAULT_NEGATIVE_PROMPT=DEFAULT_NEGATIVE_PROMPT,
        detect_params=detect_params,
        ModelPaths=ModelPaths,
    )


# --------------------------------------------------------------------------------------------
# Stand-in files
# --------------------------------------------------------------------------------------------
def write_stand_ins(folder: str, preset: dict) -> dict:
    import torch
    from safetensors.torch import save_file

    placeholder = {"ltx_bench_stand_in": torch.zeros(1)}
    ckpt = os.path.join(folder, "ltx23-22b-stand-in.safetensors")
    save_file(placeholder, ckpt, metadata={"config": json.dumps(preset["checkpoint_config"]),
                                           "model_version": preset["model_version"]})
    upsampler = os.path.join(folder, "spatial-upsampler-x2-stand-in.safetensors")
    save_file(placeholder, upsampler, metadata={"config": json.dumps(preset["upsampler"])})
    gemma_root = os.path.join(folder, "gemma-3-12b")
    os.makedirs(gemma_root)
    copied = []
    for name in sorted(os.listdir(GEMMA_SIDECARS)):
        if name in ("config.json", "model.safetensors"):
            continue
        shutil.copy(os.path.join(GEMMA_SIDECARS, name), os.path.join(gemma_root, name))
        copied.append(name)
    for needed in ("tokenizer.json", "tokenizer_config.json", "processor_config.json"):
        if needed not in copied:
            raise FileNotFoundError(f"{GEMMA_SIDECARS}: no {needed} (the official GemmaAssets need it)")
    with open(os.path.join(gemma_root, "config.json"), "w", encoding="utf-8") as f:
        json.dump(preset["gemma"], f, indent=1)
    save_file(placeholder, os.path.join(gemma_root, "model.safetensors"))
    return {"checkpoint": ckpt, "upsampler": upsampler, "gemma_root": gemma_root, "gemma_sidecars": copied}


# --------------------------------------------------------------------------------------------
# Random weights inside the official builder
# --------------------------------------------------------------------------------------------
class Recorder:
    """Stages and builds of one pipeline run."""

    def __init__(self, skip: set[str]) -> None:
        self.skip = skip
        self.current: str | None = None  # the stage a build happens in
        self.build_seconds = 0.0
        self.builds: list[dict] = []
        self.stages: dict[str, dict] = {}
        self.context = "gemma"

    def record(self, name: str) -> dict:
        if name not in self.stages:
            self.stages[name] = {"stage": name, "status": None, "wall_seconds": 0.0, "build_seconds": 0.0,
                                 "peak_bytes": 0, "peak_reserved_bytes": 0, "calls": 0, "step_ms": [],
                                 "expected_steps": 0, "errors": [], "notes": []}
        return self.stages[name]

    def skipped(self, name: str) -> bool:
        return any(stage == name and key in self.skip for key, stage in STAGES)


REC: Recorder | None = None  # the run in progress (the builder records its builds there)
_SEED = itertools.count(1000)


def configurator_label(configurator: type) -> str:
    # Path-bound Gemma configurators are subclasses named <Class>_<16 hex digits>.
    return re.sub(r"_[0-9a-f]{16}$", "", getattr(configurator, "__name__", str(configurator)))


def random_tensor(key: str, like, device, gen):  # noqa: ANN001, ANN201
    """bf16 as the published files store weights (0-d scalars f32, which the builder keeps so):
    matrices and convolutions N(0, 1/fan_in), 1-d biases and means 0, other 1-d (norm scales,
    statistics' std) 1. Values do not change the work; these keep the activations finite."""
    import torch

    shape = tuple(like.shape)
    if not like.dtype.is_floating_point:
        return torch.zeros(shape, dtype=like.dtype, device=device)
    if not shape:
        return torch.ones((), dtype=torch.float32, device=device)
    out = torch.empty(shape, dtype=torch.bfloat16, device=device)
    if out.numel() == 0:
        return out
    leaf = key.rsplit(".", 1)[-1]
    if len(shape) >= 2:
        out.normal_(0.0, 1.0 / math.sqrt(max(1, out.numel() // shape[0])), generator=gen)
    elif leaf == "bias" or leaf.startswith("mean"):  # biases, the statistics' mean-of-means
        out.zero_()
    else:
        out.fill_(1.0)
    return out


def random_state_dict(model, sd_ops, device, seed: int) -> dict:  # noqa: ANN001
    """A random tensor for every state-dict entry of `model` (the builder's meta model), keyed as the
    model names them, i.e. as the official loader hands them over after sd_ops' key mapping. Tied
    entries (one Parameter under two names) get one tensor. Of sd_ops' key-value operations, those
    that keep their key and only add model keys are applied as the loader applies them (channels-last
    VAE decoder weights; Gemma's lm_head from embed_tokens); a pure rename (the vocoder's prefix strip)
    belongs to the checkpoint's names and is left out."""
    import torch

    entries = model.state_dict(keep_vars=True)
    keys = set(entries)

    def applied(key: str, value) -> list | None:  # noqa: ANN001
        if sd_ops is None:
            return None
        outs = [(k, v) for k, v in sd_ops.apply_to_key_value(key, value)]
        out_keys = [k for k, _ in outs]
        if key in out_keys and all(k in keys for k in out_keys):
            return outs
        return None

    derived = {}  # key -> the key whose operation fills it
    for key, t in entries.items():
        try:
            outs = applied(key, torch.empty(t.shape, dtype=t.dtype, device="meta"))
        except Exception:  # noqa: BLE001  (an operation that needs data: applied to the real tensor below)
            outs = None
        for k, _ in outs or ():
            if k != key:
                derived[k] = key
    gen = torch.Generator(device=device).manual_seed(seed)
    made: dict[int, object] = {}
    sd: dict = {}
    for key, t in entries.items():
        if key in derived:
            continue
        value = made.get(id(t))
        if value is None:
            value = random_tensor(key, t, device, gen)
            made[id(t)] = value
        outs = applied(key, value)
        for k, v in outs or [(key, value)]:
            sd[k] = v
    for k, src in derived.items():
        if k not in sd:
            raise RuntimeError(f"random weights: {k} is filled by the operation on {src}, which did not emit it")
    return sd


def make_builder_class(R: SimpleNamespace):  # noqa: ANN201
    import torch

    class RandomWeightsLoader(R.SafetensorsModelStateDictLoader):
        """metadata(): the official header reader on the stand-in file. load(): random tensors for
        the model the builder is filling (`target`, set by the builder's meta_model) instead of the
        file's. `absent`: the checkpoint has none of this model's weights (LTX-2.3 files have no
        duration head), so nothing is loaded and the official code sees it missing."""

        def __init__(self, absent: bool) -> None:
            super().__init__()
            self.target = None
            self.absent = absent

        def load(self, path, sd_ops=None, device=None):  # noqa: ANN001, ANN201
            dev = device if device is not None else torch.device("cpu")
            if self.absent:
                sd = {}
            else:
                if self.target is None:
                    raise RuntimeError(f"random weights for {path}: the builder made no meta model first")
                sd = random_state_dict(self.target, sd_ops, dev, next(_SEED))
            unique = {id(v): v for v in sd.values()}
            return R.StateDict(sd=sd, device=dev, size=sum(v.numel() * v.element_size() for v in unique.values()),
                               dtype={v.dtype for v in unique.values()})

    class RandomWeightsBuilder(R.SingleGPUModelBuilder):
        """The official SingleGPUModelBuilder with the loader above; build() is timed and recorded."""

        _OPTION_NAMES = ("model_sd_ops", "module_ops", "loras", "model_loader", "registry", "lora_load_device",
                         "fuse_rule")

        def __init__(self, model_class_configurator, model_path, *args, **kwargs) -> None:  # noqa: ANN001
            kwargs.update(zip(self._OPTION_NAMES, args))
            absent = isinstance(model_class_configurator, type) and issubclass(
                model_class_configurator, R.DurationHeadConfigurator)
            self._rw_loader = RandomWeightsLoader(absent)
            kwargs["model_loader"] = self._rw_loader
            super().__init__(model_class_configurator, model_path, **kwargs)
            self._rw_label = configurator_label(model_class_configurator)

        def meta_model(self, metadata, module_ops):  # noqa: ANN001, ANN201
            model = super().meta_model(metadata, module_ops)
            self._rw_loader.target = model
            return model

        def build(self, device=None, dtype=None, **kwargs):  # noqa: ANN001, ANN201
            entry = {"model": self._rw_label, "stage": REC.current if REC else None, "status": "ok"}
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            try:
                model = super().build(device=device, dtype=dtype, **kwargs)
                torch.cuda.synchronize()
                if self._rw_loader.absent:
                    entry["status"] = "absent (the LTX-2.3 checkpoint has none of its weights)"
                else:
                    left = [n for n, p in itertools.chain(model.named_parameters(), model.named_buffers())
                            if p.is_meta]
                    if left:
                        raise RuntimeError(f"{self._rw_label}: {len(left)} tensors still on the meta device after "
                                           f"the build, e.g. {left[:3]}")
                    # Tied weights (Gemma's lm_head and embed_tokens) share one storage: count it once.
                    params = {(p.data_ptr(), p.numel()): p for p in model.parameters()}
                    unique = {**params, **{(b.data_ptr(), b.numel()): b for b in model.buffers()}}
                    entry["parameters"] = sum(p.numel() for p in params.values())
                    entry["bytes"] = sum(p.numel() * p.element_size() for p in unique.values())
                return model
            except Exception:
                entry["status"] = "failed"
                entry["error"] = traceback.format_exc()[-3000:]
                raise
            finally:
                try:
                    torch.cuda.synchronize()
                except Exception:  # noqa: BLE001  (a CUDA error is reported by the stage)
                    pass
                entry["seconds"] = time.perf_counter() - t0
                if REC is not None:
                    REC.build_seconds += entry["seconds"]
                    REC.builds.append(entry)
                gib = entry.get("bytes", 0) / 2**30
                log(f"  [build] {entry['model']}: {entry['seconds']:.2f} s, {gib:.2f} GiB, {entry['status']}"
                    f"{' (in ' + entry['stage'] + ')' if entry['stage'] else ''}")

    return RandomWeightsBuilder


# --------------------------------------------------------------------------------------------
# Stage timing around the pipeline's blocks
# --------------------------------------------------------------------------------------------
class Runner:
    def __init__(self, bo, rec: Recorder, save) -> None:  # noqa: ANN001
        self.bo = bo
        self.rec = rec
        self.save = save

    def segment(self, name: str, fn, steps: list | None = None, expected_steps: int | None = None):  # noqa: ANN001, ANN201
        """Runs fn as (a part of) stage `name`, synchronised before and after, the peak allocation
        reset at its start. Returns (ok, result); a failure is recorded with its traceback."""
        import torch

        st = self.rec.record(name)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        builds_before = self.rec.build_seconds
        self.rec.current = name
        ok, out, t0 = True, None, time.perf_counter()
        try:
            out = fn()
        except Exception:  # noqa: BLE001
            ok = False
            tb = traceback.format_exc()
            st["errors"].append(tb[-4000:])
            log(f"--- {name} FAILED:\n{tb}")
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            ok = False
            st["errors"].append("synchronize after the stage: " + traceback.format_exc()[-1000:])
        st["wall_seconds"] += time.perf_counter() - t0
        st["build_seconds"] += self.rec.build_seconds - builds_before
        self.rec.current = None
        try:
            st["peak_bytes"] = max(st["peak_bytes"], torch.cuda.max_memory_allocated())
            st["peak_reserved_bytes"] = max(st["peak_reserved_bytes"], torch.cuda.max_memory_reserved())
        except Exception:  # noqa: BLE001
            pass
        st["calls"] += 1
        if steps is not None:
            st["step_ms"].extend(steps)
            if expected_steps is not None:
                st["expected_steps"] += expected_steps
                if ok and len(steps) != expected_steps:
                    ok = False
                    st["errors"].append(f"ran {len(steps)} denoising steps; the schedule has {expected_steps}")
                    log(f"--- {name} FAILED: ran {len(steps)} denoising steps, the schedule has {expected_steps}")
        if not ok:
            st["status"] = "failed"
            free_cuda(self.bo)
        elif st["status"] is None:
            st["status"] = "ok"
        self.save()
        return ok, out

    def skip(self, name: str) -> None:
        st = self.rec.record(name)
        st["status"] = "skipped"
        if "--skip" not in st["notes"]:
            st["notes"].append("--skip")


class TimedDenoiser:
    """The denoiser a stage hands to its loop, with each call (one step) synchronised and timed."""

    def __init__(self, inner, steps: list) -> None:  # noqa: ANN001
        self._inner = inner
        self._steps = steps

    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204
        import torch

        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = self._inner(*args, **kwargs)
        torch.cuda.synchronize()
        self._steps.append((time.perf_counter() - t0) * 1e3)
        return out


class TimedBlock:
    """Stands in for one block attribute of an official pipeline: each call is (a part of) a timed
    stage; when the stage is skipped or fails, `fallback` gives a stand-in result of the right shape.
    Other attributes are the block's."""

    def __init__(self, runner: Runner, block, names: list[str], fallback, denoising: bool = False) -> None:  # noqa: ANN001
        self._tb_runner = runner
        self._tb_block = block
        self._tb_names = names
        self._tb_fallback = fallback
        self._tb_denoising = denoising
        self._tb_calls = 0

    def __getattr__(self, name: str):  # noqa: ANN204
        if name.startswith("_tb_"):
            raise AttributeError(name)
        return getattr(self._tb_block, name)

    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204
        name = self._tb_names[min(self._tb_calls, len(self._tb_names) - 1)]
        self._tb_calls += 1
        runner = self._tb_runner
        if runner.rec.skipped(name):
            runner.skip(name)
            return self._tb_fallback(*args, **kwargs)
        steps = expected = None
        if self._tb_denoising:
            steps = []
            st = runner.rec.record(name)
            if "denoiser" in kwargs:
                st["denoiser"] = type(kwargs["denoiser"]).__name__
                kwargs = dict(kwargs, denoiser=TimedDenoiser(kwargs["denoiser"], steps))
            else:
                st["notes"].append("no denoiser= keyword in the call: steps not timed")
                steps = None
            sigmas = kwargs.get("sigmas")
            expected = len(sigmas) - 1 if sigmas is not None else None
            if "width" in kwargs and "height" in kwargs:
                st["size"] = f"{kwargs['width']}x{kwargs['height']}"
        ok, out = runner.segment(name, lambda: self._tb_block(*args, **kwargs), steps=steps, expected_steps=expected)
        if not ok:
            runner.rec.record(name)["notes"].append("later stages got a random stand-in for its result")
            return self._tb_fallback(*args, **kwargs)
        return out


# --------------------------------------------------------------------------------------------
# One pipeline
# --------------------------------------------------------------------------------------------
def run_pipeline(kind: str, args: argparse.Namespace, R: SimpleNamespace, bo, files: dict, preset: dict,  # noqa: ANN001, PLR0915
                 builder_cls: type, save) -> dict:
    import torch

    global REC
    rec = Recorder(args.skip)
    REC = rec
    runner = Runner(bo, rec, save)
    width, height = args.size
    tcfg = preset["checkpoint_config"]["transformer"]
    dev = torch.device("cuda")
    res: dict = {"pipeline": kind, "status": "running", "size": f"{width}x{height}", "frames": args.frames,
                 "stage_1_size": f"{width // 2}x{height // 2}"}
    free_cuda(bo)
    res["allocated_at_start_GiB"] = torch.cuda.memory_allocated() / 2**30
    params = R.detect_params(files["checkpoint"])
    res["params"] = {"num_inference_steps": params.num_inference_steps, "frame_rate": params.frame_rate,
                     "seed": params.seed, "video_guider": repr(params.video_guider_params),
                     "audio_guider": repr(params.audio_guider_params)}

    # Stand-ins for a block's result when its stage is skipped or fails.
    tokens = R.TOKENIZER_MAX_LENGTH
    v_dim = tcfg["num_attention_heads"] * tcfg["attention_head_dim"]
    a_dim = tcfg["audio_num_attention_heads"] * tcfg["audio_attention_head_dim"]
    gen = torch.Generator(device=dev).manual_seed(7)

    def randn(*shape):  # noqa: ANN002, ANN202
        return torch.randn(*shape, generator=gen, device=dev, dtype=torch.bfloat16)

    def contexts_fallback(prompts, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        rec.context = "random"
        return [R.EmbeddingsProcessorOutput(randn(1, tokens, v_dim), randn(1, tokens, a_dim),
                                            torch.ones(1, tokens, dtype=torch.int64, device=dev)) for _ in prompts]

    def stage_fallback(*a, **k):  # noqa: ANN002, ANN003, ANN202
        pixel = R.VideoPixelShape(batch=1, frames=k["frames"], height=k["height"], width=k["width"], fps=k["fps"])
        v = R.VideoLatentShape.from_pixel_shape(pixel, scale_factors=R.VIDEO_SCALE_FACTORS).to_torch_shape()
        au = R.AudioLatentShape.from_video_pixel_shape(pixel).to_torch_shape()
        return SimpleNamespace(latent=randn(*v)), SimpleNamespace(latent=randn(*au))

    def upsample_fallback(latent, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        b, c, f, h, w = latent.shape
        return randn(b, c, f, 2 * h, 2 * w)

    # Construction (the DurationPredictor's build happens here: absent in LTX-2.3 files).
    paths = R.ModelPaths.from_monolith(files["checkpoint"], files["gemma_root"])
    t0 = time.perf_counter()
    try:
        if kind == "distilled":
            pipe = R.DistilledPipeline(model_paths=paths, spatial_upsampler_path=files["upsampler"], loras=[],
                                       device=dev)
            stage_attrs = {"stage": ["stage 1", "stage 2"]}
        else:
            pipe = R.TI2VidTwoStagesPipeline(model_paths=paths, distilled_lora=[],
                                             spatial_upsampler_path=files["upsampler"], loras=[], device=dev)
            stage_attrs = {"stage_1": ["stage 1"], "stage_2": ["stage 2"]}
    except Exception:  # noqa: BLE001
        res.update(status="failed", error="constructing the pipeline:\n" + traceback.format_exc()[-4000:])
        log(f"--- {kind}: construction FAILED:\n{res['error']}")
        return finish(res, rec)
    res["construct_s"] = time.perf_counter() - t0
    res["class"] = f"{type(pipe).__module__}.{type(pipe).__name__}"

    wrapped = {
        "prompt_encoder": (["text encoding"], contexts_fallback, False),
        "image_conditioner": (["image conditioning"], lambda *a, **k: [], False),
        "upsampler": (["upsample"], upsample_fallback, False),
        "video_decoder": (["video decode"], lambda *a, **k: iter(()), False),
        "audio_decoder": (["audio decode"], lambda *a, **k: None, False),
        **{attr: (names, stage_fallback, True) for attr, names in stage_attrs.items()},
    }
    unpatched = []
    for attr, (names, fallback, denoising) in wrapped.items():
        block = getattr(pipe, attr, None)
        if block is None:
            res.update(status="failed", error=f"{res['class']} has no attribute {attr}: the reference differs from "
                                              "v1.2.0's pipelines this script wraps")
            return finish(res, rec)
        for bname, builder in vars(block).items():
            if bname.endswith("_builder") and "streaming" not in bname and builder is not None \
                    and not isinstance(builder, builder_cls):
                unpatched.append(f"{attr}.{bname} ({type(builder).__name__})")
        setattr(pipe, attr, TimedBlock(runner, block, names, fallback, denoising))
    if unpatched:
        res.update(status="failed", error="builders not made by the random-weights builder (they would read the "
                                          "stand-in files' tensors): " + ", ".join(unpatched))
        return finish(res, rec)

    call = {"prompt": PROMPT, "seed": params.seed, "height": height, "width": width,
            "frame_rate": params.frame_rate, "images": [], "num_frames": args.frames,
            "tiling_config": R.AUTO_TILING}
    if kind == "two-stage":
        call.update(negative_prompt=R.DEFAULT_NEGATIVE_PROMPT, num_inference_steps=params.num_inference_steps,
                    video_guider_params=params.video_guider_params, audio_guider_params=params.audio_guider_params)
        res["lora"] = LORA_NOTE
    res["call"] = {k: (v if isinstance(v, (int, float, str)) else repr(v)) for k, v in call.items()
                   if k not in ("prompt", "negative_prompt")}
    log(f"\n=== official {kind}: {width}x{height}x{args.frames} (stage 1 at {width // 2}x{height // 2}), "
        f"constructed in {res['construct_s']:.1f} s (t={elapsed():.0f} s)")

    torch.cuda.synchronize()
    t_call = time.perf_counter()
    builds_before = rec.build_seconds
    with torch.inference_mode():
        try:
            out = pipe(**call)
        except Exception:  # noqa: BLE001
            res.update(status="failed", error="the pipeline call (outside its blocks):\n" + traceback.format_exc()[-4000:])
            log(f"--- {kind}: pipeline call FAILED:\n{res['error']}")
            free_cuda(bo)
            return finish(res, rec)
        if not isinstance(out, tuple) or len(out) < 2:
            res.update(status="failed", error=f"the pipeline returned {type(out).__name__}, expected "
                                              "(video chunks, audio, num_frames, tiling_config)")
            return finish(res, rec)
        video, audio = out[0], out[1]
        if len(out) >= 4:
            res["tiling_config"] = repr(out[3])
        if rec.skipped("video decode"):
            runner.skip("video decode")
        else:
            ok, n = runner.segment("video decode", lambda: drain(video))
            res["frames_decoded"] = n if ok else None
            if ok and n != args.frames:
                rec.record("video decode")["notes"].append(f"decoded {n} frames, asked for {args.frames}")
        video = None  # the exhausted iterator; its decoder was freed when it ended
    torch.cuda.synchronize()
    res["wall_s"] = time.perf_counter() - t_call
    res["wall_builds_s"] = rec.build_seconds - builds_before
    if audio is not None and hasattr(audio, "waveform"):
        res["audio_samples"] = int(audio.waveform.shape[-1])
        res["audio_sampling_rate"] = getattr(audio, "sampling_rate", None)
    res["status"] = "ok"
    del pipe, out, audio
    free_cuda(bo)
    return finish(res, rec)


def drain(video) -> int:  # noqa: ANN001
    """Consumes the official VideoDecoder's iterator of [f, h, w, c] chunks (on the GPU, in [0, 1]),
    where the MP4 writer would take them, and counts the frames."""
    n = 0
    for chunk in video:
        n += int(chunk.shape[0])
    return n


def finish(res: dict, rec: Recorder) -> dict:
    """The pipeline's report: stages with seconds = wall - builds inside, the end-to-end sum."""
    stages = []
    for raw in rec.stages.values():
        st = {k: v for k, v in raw.items()
              if k not in ("step_ms", "expected_steps", "peak_bytes", "peak_reserved_bytes", "errors", "notes")}
        st["seconds"] = raw["wall_seconds"] - raw["build_seconds"]
        st["peak_GiB"] = raw["peak_bytes"] / 2**30
        st["peak_reserved_GiB"] = raw["peak_reserved_bytes"] / 2**30
        if raw["step_ms"]:
            st["steps"] = len(raw["step_ms"])
            st["step_median_ms"] = statistics.median(raw["step_ms"])
            st["step_ms"] = [round(s, 1) for s in raw["step_ms"]]
        if raw["expected_steps"]:
            st["expected_steps"] = raw["expected_steps"]
        for k in ("errors", "notes"):
            if raw[k]:
                st[k] = list(raw[k])
        stages.append(st)
    res["stages"] = stages
    ran = [s for s in stages if s["status"] == "ok"]
    res["end_to_end_s"] = sum(s["seconds"] for s in ran)
    expected_names = [name for key, name in STAGES]
    missing = [n for n in expected_names if n not in rec.stages or rec.stages[n]["status"] != "ok"]
    res["complete"] = res.get("status") == "ok" and not missing
    if missing:
        res["end_to_end_without"] = missing
    res["builds"] = rec.builds
    res["builds_s"] = sum(b.get("seconds", 0.0) for b in rec.builds)
    res["context"] = rec.context
    return res


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------
def table(res: dict, gpu: str) -> str:
    lines = [f"\nofficial {res['pipeline']} {res['size']}x{res['frames']} (stage 1 at {res['stage_1_size']}; "
             f"LTX-2 v1.2.0, random bf16 weights) on {gpu}: {res.get('status')}"]
    if res.get("error"):
        lines.append("  error: " + res["error"].strip().splitlines()[-1])
    lines.append(f"{'stage':20s} {'time s':>9s} {'build s':>9s} {'peak GiB':>9s} {'steps':>6s} {'step ms':>9s}  status")
    for st in res.get("stages", []):
        steps = f"{st['steps']:6d}" if "steps" in st else f"{'-':>6s}"
        step_ms = f"{st['step_median_ms']:9.1f}" if "step_median_ms" in st else f"{'-':>9s}"
        lines.append(f"{st['stage']:20s} {st['seconds']:9.3f} {st['build_seconds']:9.2f} {st['peak_GiB']:9.2f} "
                     f"{steps} {step_ms}  {st['status']}{' (' + st.get('size') + ')' if st.get('size') else ''}")
    lines.append(f"{'end to end (sum)':20s} {res.get('end_to_end_s', 0.0):9.3f}"
                 f"{'' if res.get('complete') else '  INCOMPLETE: without ' + ', '.join(res.get('end_to_end_without', []))}")
    lines.append(f"builds (not in the stages): {res.get('builds_s', 0.0):.1f} s; wall of the call "
                 f"{res.get('wall_s', 0.0):.1f} s of which builds {res.get('wall_builds_s', 0.0):.1f} s; "
                 f"context: {res.get('context')}; frames decoded {res.get('frames_decoded')}, "
                 f"audio samples {res.get('audio_samples')}")
    if res.get("lora"):
        lines.append("note: " + res["lora"])
    return "\n".join(lines)


def main() -> int:  # noqa: PLR0915
    global REC
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipeline", choices=("distilled", "two-stage", "both"), default="both")
    ap.add_argument("--size", type=parse_size, default=(1536, 1024), help="output WIDTHxHEIGHT (stage 1 at half)")
    ap.add_argument("--frames", type=int, default=121)
    ap.add_argument("--skip", type=parse_skip, default=set(),
                    help="comma list of stages to leave out (their results become random stand-ins): "
                         + ", ".join(k for k, _ in STAGES) + ", decode")
    ap.add_argument("--budget", type=float, default=float(os.environ.get("BENCH_BUDGET_S", 450)),
                    help="seconds; a pipeline starts only when its estimate fits in what is left")
    ap.add_argument("--ref", default=None, help="the unpacked reference (default $LTX_REF, else .ref or .ref/LTX-2)")
    ap.add_argument("--out", default="", help="JSON report (default $OUT/official_pipeline.json)")
    ap.add_argument("--dry-run", action="store_true", help="read the preset and paths, print the plan, import no torch")
    args = ap.parse_args()
    if args.frames < 1 or (args.frames - 1) % 8:
        ap.error(f"--frames {args.frames}: the VAE needs 8k+1 frames (e.g. 121)")
    out_path = args.out or os.path.join(os.environ.get("OUT") or os.path.join(REPO_ROOT, "out"),
                                        "official_pipeline.json")
    kinds = ["distilled", "two-stage"] if args.pipeline == "both" else [args.pipeline]

    preset = load_preset(PRESETS_CPP)
    ref = resolve_ref(args.ref)
    report: dict = {
        "tool": "tools/bench/official_pipeline.py",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "argv": sys.argv[1:],
        "reference": reference_versions(ref),
        "preset": {"name": preset["name"], "source": os.path.relpath(PRESETS_CPP, REPO_ROOT),
                   "model_version": preset["model_version"], "text_tokens": preset["text_tokens"]},
        "size": {"width": args.size[0], "height": args.size[1], "frames": args.frames},
        "skip": sorted(args.skip),
        "prompt": PROMPT,
        "not_run": NOT_RUN,
        "pipelines": {},
    }

    def save() -> None:
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        tmp = out_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, default=str)
        os.replace(tmp, out_path)

    log(f"# official LTX-2.3 pipelines, random weights: {', '.join(kinds)} at {args.size[0]}x{args.size[1]}x"
        f"{args.frames}; reference {ref} ({report['reference'].get('ltx-pipelines')}); preset {preset['name']} "
        f"from {PRESETS_CPP}")
    if args.dry_run:
        log(json.dumps({"report": report, "checkpoint_config_keys": sorted(preset["checkpoint_config"]),
                        "gemma_text_config": preset["gemma"].get("text_config"), "upsampler": preset["upsampler"],
                        "out": out_path}, indent=1, default=str))
        return 0

    logging.basicConfig(level=logging.INFO)  # as the official main()s: their "Building ..." lines
    bo, scratch = import_bench_official(ref)
    import torch  # noqa: PLC0415  (after bench_official's stubs and sys.path)

    report["env"] = {
        "python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "stubbed": list(bo.STUBBED),
    }
    try:
        import transformers  # noqa: PLC0415

        report["env"]["transformers"] = transformers.__version__
    except Exception as e:  # noqa: BLE001
        report["env"]["transformers"] = f"not importable ({type(e).__name__}: {e})"
    if not torch.cuda.is_available():
        report["error"] = "no CUDA device"
        save()
        log("official_pipeline: no CUDA device")
        return 1
    props = torch.cuda.get_device_properties(0)
    gpu = torch.cuda.get_device_name(0)
    report["env"].update(gpu=gpu, gpu_memory_GiB=props.total_memory / 2**30,
                         capability=list(torch.cuda.get_device_capability(0)))
    log(f"torch {torch.__version__}, CUDA {torch.version.cuda}, transformers {report['env']['transformers']}, "
        f"GPU {gpu} ({props.total_memory / 2**30:.0f} GiB); stubbed: {bo.STUBBED or 'none'}")

    try:
        R = import_reference()
    except Exception:  # noqa: BLE001
        report["error"] = "importing the reference:\n" + traceback.format_exc()[-4000:]
        save()
        log(report["error"])
        return 1
    if "tqdm" in " ".join(bo.STUBBED) or isinstance(getattr(R.samplers, "tqdm", None), mock.Mock):
        # A stubbed tqdm would iterate nothing: the denoising loops would run no step.
        R.samplers.tqdm = lambda it, *a, **k: it
        report["env"]["tqdm"] = "stubbed: the samplers' tqdm replaced by a pass-through"

    folder = tempfile.mkdtemp(prefix="official_pipeline_")
    try:
        files = write_stand_ins(folder, preset)
        report["stand_ins"] = {k: (os.path.basename(v) if isinstance(v, str) else v) for k, v in files.items()}
        builder_cls = make_builder_class(R)
        R.blocks.Builder = builder_cls  # every block's `Builder(...)`: the random-weights builder
        save()
        for kind in kinds:
            left = args.budget - elapsed()
            if left < NEED_S[kind]:
                report["pipelines"][kind] = {"pipeline": kind, "status": f"skipped: {left:.0f} s of --budget "
                                                                          f"{args.budget:.0f} s left (< {NEED_S[kind]} s)"}
                log(f"--- {kind}: {report['pipelines'][kind]['status']}")
                save()
                continue
            report["pipelines"][kind] = {"pipeline": kind, "status": "running"}
            try:
                res = run_pipeline(kind, args, R, bo, files, preset, builder_cls, save_live(report, kind, save))
            except Exception:  # noqa: BLE001
                res = finish({"pipeline": kind, "size": f"{args.size[0]}x{args.size[1]}", "frames": args.frames,
                              "stage_1_size": f"{args.size[0] // 2}x{args.size[1] // 2}", "status": "failed",
                              "error": traceback.format_exc()[-4000:]}, REC or Recorder(args.skip))
                log(f"--- {kind} FAILED:\n{res['error']}")
                free_cuda(bo)
            REC = None
            report["pipelines"][kind] = res
            save()
            log(table(res, gpu))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)

    log("\n================ SUMMARY (seconds; builds excluded) ================")
    for kind, res in report["pipelines"].items():
        if "stages" in res:
            log(table(res, gpu))
    for kind, res in report["pipelines"].items():
        if "stages" in res:
            log(f"official {kind:10s} end to end {res['end_to_end_s']:8.2f} s"
                f"{'' if res.get('complete') else ' (incomplete: ' + ', '.join(res.get('end_to_end_without', [])) + ')'}"
                f", peak {max((s['peak_GiB'] for s in res['stages']), default=0.0):.1f} GiB, context {res['context']}")
        else:
            log(f"official {kind:10s} {res.get('status')}")
    report["total_wall_s"] = elapsed()
    save()
    log(f"total wall {elapsed():.0f} s; JSON: {out_path}")
    ok = all(r.get("complete") for r in report["pipelines"].values())
    return 0 if ok else 1


def save_live(report: dict, kind: str, save):  # noqa: ANN001, ANN201
    """The save a running pipeline calls after each stage: its stages so far under its name."""

    def live() -> None:
        rec = REC
        if rec is not None:
            report["pipelines"][kind] = {"pipeline": kind, "status": "running",
                                         "stages_so_far": list(rec.stages.values()), "builds": rec.builds}
        save()

    return live


if __name__ == "__main__":
    sys.exit(main())
