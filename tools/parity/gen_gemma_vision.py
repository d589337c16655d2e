#!/usr/bin/env python3
"""Parity fixture for image-aware prompt enhancement (the reference's enhance_i2v on Gemma 3).

The model is the tiny Gemma 3 of tests/fixtures/text_gemma3_root/ (Gemma3ForConditionalGeneration:
text hidden 24 x 6 layers, SigLIP vision tower hidden 16 x 1 layer at 56 px with 14 px patches,
projector pooling the 4x4 patch grid to mm_tokens_per_image = 4 tokens). The HF model is built from
that folder's config.json as the reference builds it (build_gemma_hf_config +
AutoModelForImageTextToText.from_config; no network, no hub download) and its seeded random weights
(made by the fixture's own generator) are loaded by name from the folder's model.safetensors
(google/gemma-3 checkpoint names, mapped to whatever names the installed transformers uses). The processor and tokenizer are the reference's own builders
(ltx_core GemmaAssets + build_gemma_hf_tokenizer + build_gemma_processor) on the same folder.

The recorded run follows ltx_pipelines.utils.helpers.generate_enhanced_prompt with an image:
  decode_image(PNG)  ->  resize_aspect_ratio_preserving(long side 896)  ->
  LTXGemmaTextEncoder.enhance_i2v(prompt, image, system_prompt=SYSTEM_PROMPT, seed=SEED)
with one deliberate change: decoding is greedy (do_sample False, max_new_tokens MAX_NEW_TOKENS)
instead of Gemma 3's sampling, so the generated tokens are comparable (torch's sampling stream is
not reproduced by ltx.cpp). The system prompt is a short fixed text passed explicitly (the
reference's default prompt file is not redistributed).

Recorded in OUT/gemma_vision.io.safetensors (tensor names; metadata holds the strings):
  in.image_u8          [H, W, 3] u8   the decoded test PNG (written as OUT/gemma_vision.png)
  in.image_resized_u8  [h, w, 3] u8   after resize_aspect_ratio_preserving(896) (torch, uint8)
  pixel_values         [1, 3, S, S] f32  the processor's output (Gemma3ImageProcessor)
  input_ids            [1, T] i64     after the reference's left padding to a multiple of 8
  attention_mask       [1, T] i64
  token_type_ids       [1, T] i64     1 on image soft tokens (the processor's key, whichever name)
  vision_out           [1, P, Dv] f32 vision_tower(...).last_hidden_state (post_layernorm included)
  projector_out        [1, N, D] f32  multi_modal_projector(vision_out)
  inputs_embeds        [1, T, D] f32  the language model's input (scaled text embeddings with the
                                      image soft tokens replaced by projector_out)
  prefill_logits       [1, T, V] f32  model(**inputs).logits (image tokens attend bidirectionally)
  prefill_logits_tokens [1, T - pads, V] f32  the same without the left pads' rows
  generated_ids        [G] i64        the greedy new tokens of generate()
metadata: prompt, system_prompt, rendered (the chat template text the processor received),
decoded (the reference's returned enhancement, before clean_response), versions.

Usage (PyTorch + transformers + safetensors + Pillow; CPU; no PyAV needed):

    CUDA_VISIBLE_DEVICES= PYTHONPATH=<ref>/packages/ltx-core/src:<ref>/packages/ltx-pipelines/src \\
        python3 tools/parity/gen_gemma_vision.py --out OUTDIR

Copy OUTDIR/gemma_vision.io.safetensors and OUTDIR/gemma_vision.png into tests/fixtures/.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
GEMMA_ROOT = FIXTURES / "text_gemma3_root"

PROMPT = "a red fox runs across a snowy field at dawn"
SYSTEM_PROMPT = "You describe videos. Expand the user's prompt using the image."
SEED = 42
MAX_NEW_TOKENS = 8
IMAGE_H, IMAGE_W = 36, 48  # the test PNG; the reference scales it to 672 x 896 first
LONG_SIDE = 896


def stub_missing_modules() -> list[str]:
    """PyAV / OpenImageIO are imported by the reference's media module but not used here."""
    stubbed = []
    for name in ("av", "OpenImageIO", "torchaudio"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            sys.modules[name] = mock.MagicMock(name=name)
            stubbed.append(name)
    return stubbed


STUBBED = stub_missing_modules()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from ltx_core.text_encoders.gemma.encoders.base_encoder import LTXGemmaTextEncoder  # noqa: E402
from ltx_core.text_encoders.gemma.gemma_assets import (  # noqa: E402
    GemmaAssets,
    build_gemma_hf_config,
    build_gemma_hf_tokenizer,
    build_gemma_processor,
)
from ltx_pipelines.utils.media_io.decode import decode_image  # noqa: E402
from ltx_pipelines.utils.media_io.resize import resize_aspect_ratio_preserving  # noqa: E402


def test_image() -> np.ndarray:
    """A deterministic RGB image with gradients, edges and seeded noise (resampling sees detail)."""
    rng = np.random.default_rng(1234)
    y, x = np.mgrid[0:IMAGE_H, 0:IMAGE_W].astype(np.float64)
    r = 255.0 * x / (IMAGE_W - 1)
    g = 255.0 * y / (IMAGE_H - 1)
    b = np.where(((x // 6) + (y // 6)) % 2 == 0, 220.0, 30.0)
    img = np.stack([r, g, b], axis=-1) + rng.normal(0.0, 18.0, size=(IMAGE_H, IMAGE_W, 3))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


# Segments that transformers versions add or drop around the same parameter: Gemma3's
# `model.language_model.*` vs the checkpoint's `language_model.model.*`, and the vision tower with
# or without its `vision_model.` level. Names compared without them identify a parameter.
_LAYOUT_SEGMENTS = frozenset({"model", "vision_model"})


def layout_free_name(name: str) -> str:
    return ".".join(part for part in name.split(".") if part not in _LAYOUT_SEGMENTS)


def build_model(root: Path, assets: GemmaAssets) -> torch.nn.Module:
    # As the reference's GemmaTextEncoderConfigurator: the HF config of the assets, then
    # AutoModelForImageTextToText.from_config (Gemma3ForConditionalGeneration), here in float32.
    config = build_gemma_hf_config(assets)
    torch.manual_seed(0)  # only affects tensors the file does not hold (none but the tied lm_head)
    model = transformers.AutoModelForImageTextToText.from_config(config).to(torch.float32).eval()
    with safe_open(str(root / "model.safetensors"), framework="pt") as f:
        stored = {k: f.get_tensor(k).to(torch.float32) for k in f.keys()}
    # Parameters only (buffers such as position ids are derived, not stored); a tied lm_head is
    # listed once under the embedding's name.
    state = {k: v.detach() for k, v in model.named_parameters()}
    by_layout_free = {}
    for name in stored:
        key = layout_free_name(name)
        if key in by_layout_free:
            raise KeyError(f"{name!r} and {by_layout_free[key]!r} of {root / 'model.safetensors'} collide as {key!r}")
        by_layout_free[key] = name
    loaded, used = {}, set()
    for key in state:
        if key.endswith("lm_head.weight"):
            continue
        name = by_layout_free.get(layout_free_name(key))
        if name is None:
            raise KeyError(
                f"model tensor {key!r} (as {layout_free_name(key)!r}) is not in {root / 'model.safetensors'}; "
                f"its names: {sorted(stored)}"
            )
        if tuple(stored[name].shape) != tuple(state[key].shape):
            raise ValueError(f"{name}: file shape {tuple(stored[name].shape)} != model shape {tuple(state[key].shape)}")
        loaded[key] = stored[name]
        used.add(name)
    unused = sorted(set(stored) - used)
    if unused:
        raise KeyError(f"tensors of {root / 'model.safetensors'} the model does not use: {unused}")
    result = model.load_state_dict(loaded, strict=False)
    if result.unexpected_keys:
        raise KeyError(f"load_state_dict did not take {result.unexpected_keys}")
    params = dict(model.named_parameters())
    for key, value in loaded.items():
        if not torch.equal(params[key].detach(), value):
            raise RuntimeError(f"{key} did not load")
    # lm_head is tied to the embedding (the checkpoint does not store it).
    emb = model.get_input_embeddings().weight
    out = model.get_output_embeddings()
    if out.weight.data_ptr() != emb.data_ptr():
        out.weight.data.copy_(emb.data)
    # EOS ids / pad id as the folder's generation_config.json gives them (read locally).
    model.generation_config = transformers.GenerationConfig.from_pretrained(str(root))
    return model


def parts(model: torch.nn.Module):
    """(vision_tower, multi_modal_projector, language_model) across transformers layouts."""
    inner = model.model if hasattr(model, "model") and hasattr(model.model, "vision_tower") else model
    return inner.vision_tower, inner.multi_modal_projector, inner.language_model


class RecordingProcessor:
    """Wraps the reference's processor: records what it returns for the enhancement call."""

    def __init__(self, processor):
        self._processor = processor
        self.tokenizer = processor.tokenizer
        self.calls = []

    def __call__(self, *args, **kwargs):
        out = self._processor(*args, **kwargs)
        self.calls.append((kwargs.get("text"), out))
        return out

    def __getattr__(self, name):
        return getattr(self._processor, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--gemma-root", default=str(GEMMA_ROOT), help="the tiny Gemma 3 root folder")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    root = Path(args.gemma_root)
    torch.set_num_threads(1)

    # The test image goes through the reference's own decoder and resize.
    png = out_dir / "gemma_vision.png"
    Image.fromarray(test_image()).save(png)  # u8 [H, W, 3]: an RGB image
    image_u8 = decode_image(image_path=str(png))
    image = torch.tensor(image_u8)
    image = resize_aspect_ratio_preserving(image, LONG_SIDE).to(torch.uint8)

    assets = GemmaAssets.load(root)
    hf_tokenizer = build_gemma_hf_tokenizer(assets)
    processor = RecordingProcessor(build_gemma_processor(assets, hf_tokenizer))
    model = build_model(root, assets)

    encoder = LTXGemmaTextEncoder(model=model, tokenizer=None, processor=processor, dtype=torch.float32)
    greedy = {"do_sample": False, "max_new_tokens": MAX_NEW_TOKENS}
    generate_calls = []
    original_generate = model.generate

    def recording_generate(**kwargs):
        result = original_generate(**kwargs)
        generate_calls.append(({k: v for k, v in kwargs.items()}, result))
        return result

    with mock.patch.object(LTXGemmaTextEncoder, "_default_generation_kwargs", lambda self: dict(greedy)), \
            mock.patch.object(model, "generate", recording_generate):
        decoded = encoder.enhance_i2v(PROMPT, image, system_prompt=SYSTEM_PROMPT, seed=SEED)
    assert len(processor.calls) == 1 and len(generate_calls) == 1
    processor_text, _ = processor.calls[0]
    gen_kwargs, gen_out = generate_calls[0]
    model_inputs = {k: v for k, v in gen_kwargs.items() if isinstance(v, torch.Tensor)}
    input_ids = model_inputs["input_ids"]
    generated = gen_out[0][input_ids.shape[1] :]

    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"User Raw Input Prompt: {PROMPT}."}]},
    ]
    rendered = processor.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if rendered != processor_text:
        raise RuntimeError("the enhancement rendered a different chat text than the recorded messages")

    type_key = next((k for k in ("token_type_ids", "mm_token_type_ids") if k in model_inputs), None)
    if type_key is None:
        token_type_ids = (input_ids == model.config.image_token_id).to(torch.int64)
    else:
        token_type_ids = model_inputs[type_key].to(torch.int64)

    vision, projector, language = parts(model)
    captured = {}

    def capture(_module, args, kwargs):
        captured["inputs_embeds"] = kwargs.get("inputs_embeds")

    with torch.inference_mode():
        pixel_values = model_inputs["pixel_values"].to(torch.float32)
        vision_out = vision(pixel_values=pixel_values).last_hidden_state
        projector_out = projector(vision_out)
        handle = language.register_forward_pre_hook(capture, with_kwargs=True)
        try:
            forward_inputs = {k: v for k, v in model_inputs.items()}
            logits = model(**forward_inputs).logits
        finally:
            handle.remove()
    if captured.get("inputs_embeds") is None:
        raise RuntimeError("the language model was not called with inputs_embeds; cannot record the merged input")

    first_token = int((model_inputs["attention_mask"][0] == 0).sum().item())  # left pads
    tensors = {
        "in.image_u8": torch.from_numpy(np.ascontiguousarray(image_u8)).to(torch.uint8),
        "in.image_resized_u8": image.contiguous(),
        "pixel_values": pixel_values.contiguous(),
        "input_ids": input_ids.to(torch.int64).contiguous(),
        "attention_mask": model_inputs["attention_mask"].to(torch.int64).contiguous(),
        "token_type_ids": token_type_ids.contiguous(),
        "vision_out": vision_out.to(torch.float32).contiguous(),
        "projector_out": projector_out.to(torch.float32).contiguous(),
        "inputs_embeds": captured["inputs_embeds"].to(torch.float32).contiguous(),
        "prefill_logits": logits.to(torch.float32).contiguous(),
        # The same without the left pads' rows (fully masked queries: implementation-defined).
        "prefill_logits_tokens": logits[:, first_token:].to(torch.float32).contiguous(),
        "generated_ids": generated.to(torch.int64).contiguous(),
    }
    metadata = {
        "prompt": PROMPT,
        "system_prompt": SYSTEM_PROMPT,
        "rendered": rendered,
        "decoded": decoded,
        "seed": str(SEED),
        "max_new_tokens": str(MAX_NEW_TOKENS),
        "long_side": str(LONG_SIDE),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "image_processor": type(processor.image_processor).__name__,
        "token_type_key": type_key or "(none: derived from image_token_id)",
        "stubbed_modules": ",".join(STUBBED),
    }
    # Own storage per tensor: safetensors refuses views of one another (the logits and their rows).
    tensors = {k: v.detach().contiguous().clone() for k, v in tensors.items()}
    save_file(tensors, str(out_dir / "gemma_vision.io.safetensors"), metadata=metadata)
    summary = {k: list(v.shape) for k, v in tensors.items()}
    summary.update({k: metadata[k] for k in ("decoded", "torch", "transformers", "image_processor", "token_type_key")})
    summary["generated_ids"] = generated.tolist()
    (out_dir / "gen_gemma_vision.summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
