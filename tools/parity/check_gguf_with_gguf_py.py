#!/usr/bin/env python3
"""Checks a GGUF file written by `ltx quantize` / `ltx convert` with llama.cpp's gguf-py, an
implementation independent of ltx's writer and dequantiser, the way ComfyUI-GGUF's loader reads it.

    ltx quantize CKPT.safetensors --type Q4_K_M --out q.gguf
    ltx convert q.gguf --to safetensors --dtype f32 --out q.f32.safetensors
    python3 tools/parity/check_gguf_with_gguf_py.py --gguf-py LLAMA_CPP/gguf-py q.gguf \
        [--expected q.f32.safetensors]

Needs numpy. Checks, as ComfyUI-GGUF's loader.py does: gguf-py's GGUFReader opens the file;
general.architecture is a string in the loader's image-model list ("ltxv"); every
comfy.gguf.orig_shape.* is an array of int32; every tensor type is one gguf-py dequantises; and
with --expected (ltx's own dequantisation: `ltx convert --to safetensors --dtype f32`, names with
the "model.diffusion_model." prefix, dense tensors in their own dtype) every tensor dequantised by gguf-py equals ltx's bit for bit. Exit status 0 when all hold.
"""

import argparse
import importlib
import json
import os
import struct
import sys
import types

import numpy as np

# ComfyUI-GGUF loader.py's IMG_ARCH_LIST (December 2025).
IMG_ARCH_LIST = {"flux", "sd1", "sdxl", "sd3", "aura", "hidream", "cosmos", "ltxv", "hyvid", "wan",
                 "lumina2", "qwen_image"}
PREFIX = "model.diffusion_model."


def load_gguf_py(root):
    pkg_dir = os.path.join(root, "gguf")
    if not os.path.isfile(os.path.join(pkg_dir, "gguf_reader.py")):
        sys.exit(f"{root}: not a gguf-py folder (no gguf/gguf_reader.py)")
    pkg = types.ModuleType("gguf")
    pkg.__path__ = [pkg_dir]
    sys.modules["gguf"] = pkg
    return {n: importlib.import_module("gguf." + n) for n in ("constants", "lazy", "quants", "gguf_reader")}


def read_f32_safetensors(path):
    """The float tensors of a safetensors file, widened to f32 (exactly)."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = data[8 + n + b:8 + n + e]
        if info["dtype"] == "F32":
            v = np.frombuffer(raw, dtype=np.float32)
        elif info["dtype"] == "BF16":
            v = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] == "F16":
            v = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
        else:
            continue
        out[name] = v.reshape(info["shape"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    ap.add_argument("file")
    ap.add_argument("--expected", help="ltx convert --to safetensors --dtype f32 of the same file")
    args = ap.parse_args()
    mods = load_gguf_py(args.gguf_py)
    c, q, r = mods["constants"], mods["quants"], mods["gguf_reader"]
    reader = r.GGUFReader(args.file)
    problems = []

    arch = reader.get_field("general.architecture")
    if arch is None or arch.types != [c.GGUFValueType.STRING]:
        problems.append("general.architecture is missing or not a string")
    else:
        name = str(arch.parts[arch.data[-1]], encoding="utf-8")
        if name not in IMG_ARCH_LIST:
            problems.append(f"general.architecture {name!r} is not one ComfyUI-GGUF loads")
    for key, field in reader.fields.items():
        if key.startswith("comfy.gguf.orig_shape.") and field.types != [c.GGUFValueType.ARRAY, c.GGUFValueType.INT32]:
            problems.append(f"{key} is not an array of int32")

    expected = read_f32_safetensors(args.expected) if args.expected else {}
    counts = {}
    seen = set()
    for t in reader.tensors:
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
        try:
            values = q.dequantize(t.data, t.tensor_type)
        except Exception as e:  # noqa: BLE001 - any failure is a finding
            problems.append(f"{t.name}: gguf-py cannot dequantise {t.tensor_type.name}: {e}")
            continue
        want = expected.get(PREFIX + t.name, expected.get(t.name))
        if args.expected and want is None:
            problems.append(f"{t.name}: not in {args.expected}")
        elif want is not None:
            seen.add(PREFIX + t.name if PREFIX + t.name in expected else t.name)
            orig = reader.get_field("comfy.gguf.orig_shape." + t.name)  # ComfyUI-GGUF's logical shape, when present
            shape = tuple(int(d) for d in (orig.contents() if orig is not None else reversed(t.shape.tolist())))
            got = np.asarray(values, dtype=np.float32).reshape(-1)
            if shape != tuple(want.shape):
                problems.append(f"{t.name}: GGUF shape {shape} (orig_shape, else ne reversed) != expected {tuple(want.shape)}")
            elif not np.array_equal(got.view(np.uint32), want.reshape(-1).view(np.uint32)):
                w = want.reshape(-1)
                bad = got.view(np.uint32) != w.view(np.uint32)
                with np.errstate(invalid="ignore"):
                    diff = np.abs(got.astype(np.float64) - w.astype(np.float64))
                problems.append(f"{t.name}: gguf-py's dequantisation differs from ltx's in {int(bad.sum())} of {bad.size} "
                                f"values, max |diff| {np.nanmax(diff[bad]):.6g} at flat index {int(np.argmax(np.where(bad, np.nan_to_num(diff, nan=np.inf), -1)))}")
    for name in sorted(set(expected) - seen) if args.expected else []:
        problems.append(f"{name}: in {args.expected} but not in the GGUF")
    print(f"{args.file}: {len(reader.tensors)} tensors, " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
