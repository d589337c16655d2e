#!/usr/bin/env python3
"""Writes the GGUF test fixtures (tests/fixtures/gguf/) with llama.cpp's gguf-py, an implementation
independent of ltx's reader and dequantiser.

    python3 tools/parity/gen_gguf_fixtures.py --gguf-py LLAMA_CPP/gguf-py [--out tests/fixtures/gguf]

Needs numpy (Debian: python3-numpy). gguf-py is used from the given checkout (its package __init__
pulls in optional modules, so only constants, quants, gguf_writer and gguf_reader are loaded).

Files:
  blocks.gguf                 one tensor per GGML type ltx dequantises: quantized by gguf-py where it
                              can ("<type>"), and random block bytes with chosen f16 scales for
                              every block type ("<type>.random"); a 3-D one ("Q8_0.3d").
  blocks.expected.safetensors gguf-py's dequantisation of each of them, f32, same names and shapes.
  metadata.gguf               metadata of every value type, arrays of every element type, an empty
                              array, general.alignment 64, a ComfyUI-GGUF orig_shape record, and a
                              few tensors.
  metadata.expected.json      every key as gguf-py's GGUFReader reads it back: types and values.
  ltx23_tiny.gguf             tests/fixtures/ltx23.weights.bf16.safetensors converted the way the
                              community LTX files are (ComfyUI-GGUF's tools/convert.py policy):
                              "model.diffusion_model." stripped, general.architecture "ltxv",
                              general.quantization_version 2, general.file_type, the safetensors
                              metadata ("config", "model_version") as string values; 1-D, small
                              (<= 1024 values) and scale_shift_table tensors F32, the other weights
                              Q8_0 (transformer_blocks.0) or Q4_0.
"""

import argparse
import importlib
import json
import os
import struct
import sys
import types

import numpy as np

ROWS, COLS = 3, 512


def load_gguf_py(root):
    pkg_dir = os.path.join(root, "gguf")
    if not os.path.isfile(os.path.join(pkg_dir, "gguf_writer.py")):
        sys.exit(f"{root}: not a gguf-py folder (no gguf/gguf_writer.py)")
    pkg = types.ModuleType("gguf")
    pkg.__path__ = [pkg_dir]
    sys.modules["gguf"] = pkg
    mods = {}
    for name in ("constants", "lazy", "quants", "gguf_writer", "gguf_reader"):
        mods[name] = importlib.import_module("gguf." + name)
    return mods


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, arr in tensors:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        blobs.append(arr.tobytes())
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        assert info["dtype"] == "BF16", (name, info["dtype"])
        b, e = info["data_offsets"]
        raw = np.frombuffer(data[8 + n + b:8 + n + e], dtype=np.uint16)
        f32 = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = f32.reshape(info["shape"])
    return out, meta


# ---------------------------------------------------------------------------------------- blocks

# Byte offsets of the f16 scales inside each block type (ggml-common.h), and the type's sizes.
SCALE_OFFSETS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}


def random_blocks(rng, c, qtype, rows, cols):
    block, size = c.GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    # Scales: mostly ordinary magnitudes of both signs, some f16 subnormals and zeros.
    kinds = rng.integers(0, 10, size=(n_blocks, len(SCALE_OFFSETS[qtype.name])))
    for bi in range(n_blocks):
        for si, off in enumerate(SCALE_OFFSETS[qtype.name]):
            k = kinds[bi, si]
            if k == 0:
                v = np.float16(0.0)
            elif k == 1:
                v = np.float16(rng.integers(1, 1024) * 2.0 ** -24)  # subnormal
            else:
                v = np.float16(rng.uniform(-0.05, 0.05))
            raw[bi, off:off + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
    return raw.reshape(rows, cols // block * size)


def gen_blocks(out, mods):
    c, q, w = mods["constants"], mods["quants"], mods["gguf_writer"]
    T = c.GGMLQuantizationType
    rng = np.random.default_rng(20260501)
    writer = w.GGUFWriter(os.path.join(out, "blocks.gguf"), arch="ltx-test")
    expected = []

    def add(name, raw, qtype, shape):
        writer.add_tensor(name, raw, raw_dtype=qtype)
        deq = q.dequantize(raw, qtype).astype(np.float32).reshape(shape)
        expected.append((name, deq))

    data = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    data[0, :8] = [0.0, -0.0, 1e-8, -3.5, 65504.0, 1e-30, 2.0 ** -20, 7.25]
    writer.add_tensor("F32", data, raw_dtype=T.F32)
    expected.append(("F32", data))
    f16 = data.astype(np.float16)
    writer.add_tensor("F16", f16, raw_dtype=T.F16)
    expected.append(("F16", f16.astype(np.float32)))
    for t in (T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0):
        add(t.name, q.quantize(data, t), t, (ROWS, COLS))
    for t in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K):
        add(t.name + ".random", random_blocks(rng, c, t, ROWS, COLS), t, (ROWS, COLS))
    three_d = rng.standard_normal((2, 3, 64)).astype(np.float32)
    add("Q8_0.3d", q.quantize(three_d, T.Q8_0), T.Q8_0, (2, 3, 64))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    write_safetensors(os.path.join(out, "blocks.expected.safetensors"), expected,
                      {"generator": "tools/parity/gen_gguf_fixtures.py",
                       "dequantised_by": "gguf-py quants.dequantize"})


# -------------------------------------------------------------------------------------- metadata

def gen_metadata(out, mods):
    c, q, w = mods["constants"], mods["quants"], mods["gguf_writer"]
    V, T = c.GGUFValueType, c.GGMLQuantizationType

    class TypedArray(list):
        def __init__(self, etype, values):
            super().__init__(values)
            self.etype = etype

    class Writer(w.GGUFWriter):
        # gguf-py infers an array's element type (int -> i32, float -> f32); these arrays name it.
        def _pack_val(self, val, vtype, add_vtype):
            if vtype == V.ARRAY and isinstance(val, TypedArray):
                data = bytearray()
                if add_vtype:
                    data += self._pack("I", vtype)
                data += self._pack("I", val.etype)
                data += self._pack("Q", len(val))
                for item in val:
                    data += self._pack_val(item, val.etype, add_vtype=False)
                return bytes(data)
            return super()._pack_val(val, vtype, add_vtype)

    writer = Writer(os.path.join(out, "metadata.gguf"), arch="ltxv")
    writer.add_custom_alignment(64)
    writer.add_name("metadata test")
    writer.add_uint8("test.u8", 250)
    writer.add_int8("test.i8", -120)
    writer.add_uint16("test.u16", 65000)
    writer.add_int16("test.i16", -32000)
    writer.add_uint32("test.u32", 4000000000)
    writer.add_int32("test.i32", -2000000000)
    writer.add_float32("test.f32", 0.1)
    writer.add_bool("test.bool_true", True)
    writer.add_bool("test.bool_false", False)
    writer.add_string("test.string", "héllo, GGUF ✓")
    writer.add_uint64("test.u64", 18446744073709551615)
    writer.add_int64("test.i64", -9223372036854775808)
    writer.add_float64("test.f64", -1.0e300)
    writer.add_string("config", json.dumps({"transformer": {"num_layers": 1}}))
    arrays = {
        "u8": (V.UINT8, [0, 1, 255]), "i8": (V.INT8, [-128, 0, 127]),
        "u16": (V.UINT16, [0, 65535]), "i16": (V.INT16, [-32768, 32767]),
        "u32": (V.UINT32, [0, 4294967295]), "i32": (V.INT32, [-2147483648, 7]),
        "f32": (V.FLOAT32, [0.5, -2.25, 3.0e38]), "bool": (V.BOOL, [True, False, True]),
        "string": (V.STRING, ["a", "", "ζ"]), "u64": (V.UINT64, [18446744073709551615, 1]),
        "i64": (V.INT64, [-9223372036854775808, 9223372036854775807]),
        "f64": (V.FLOAT64, [1.0e-300, 0.1]),
    }
    for name, (etype, values) in arrays.items():
        writer.add_key_value("test.array." + name, TypedArray(etype, values), V.ARRAY)
    writer.add_key_value("test.array.empty", TypedArray(V.INT32, []), V.ARRAY)
    # ComfyUI-GGUF's record of a reshaped tensor: logical [4, 2, 32] stored as one row of 256.
    writer.add_key_value("comfy.gguf.orig_shape.reshaped", TypedArray(V.INT32, [4, 2, 32]), V.ARRAY)

    rng = np.random.default_rng(7)
    writer.add_tensor("dense.f32", rng.standard_normal((2, 3)).astype(np.float32), raw_dtype=T.F32)
    writer.add_tensor("dense.f16", rng.standard_normal((5,)).astype(np.float16), raw_dtype=T.F16)
    writer.add_tensor("dense.bf16", q.quantize(rng.standard_normal((2, 2, 4)).astype(np.float32),
                                               T.BF16), raw_dtype=T.BF16)
    writer.add_tensor("quant.q8_0", q.quantize(rng.standard_normal((4, 64)).astype(np.float32),
                                               T.Q8_0), raw_dtype=T.Q8_0)
    writer.add_tensor("reshaped", q.quantize(rng.standard_normal((1, 256)).astype(np.float32),
                                             T.Q8_0), raw_dtype=T.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    # What an independent reader sees.
    reader = mods["gguf_reader"].GGUFReader(os.path.join(out, "metadata.gguf"))
    fields = []
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue  # the reader's pseudo-fields for the header
        tnames = [V(t).name for t in field.types]
        main = field.types[0]

        def scalar(part, t):
            if t == V.STRING:
                return bytes(part).decode("utf-8")
            v = part[0].item()
            if t == V.BOOL:
                return bool(v)
            return float(v) if t in (V.FLOAT32, V.FLOAT64) else int(v)

        if main == V.ARRAY:
            etype = field.types[1] if len(field.types) > 1 else None
            value = [scalar(field.parts[i], etype) for i in field.data]
        else:
            value = scalar(field.parts[field.data[0]], main)
        fields.append({"key": name, "types": tnames, "value": value})
    tensors = [{"name": t.name, "type": t.tensor_type.name, "ne": [int(x) for x in t.shape],
                "offset": int(t.data_offset) - int(reader.data_offset), "nbytes": int(t.n_bytes)}
               for t in reader.tensors]
    with open(os.path.join(out, "metadata.expected.json"), "w") as f:
        json.dump({"fields": fields, "tensors": tensors, "alignment": int(reader.alignment),
                   "data_offset": int(reader.data_offset)}, f, indent=1, ensure_ascii=False)
        f.write("\n")


# --------------------------------------------------------------------------------- LTX community

def gen_ltx(out, mods, src):
    c, q, w = mods["constants"], mods["quants"], mods["gguf_writer"]
    T = c.GGMLQuantizationType
    tensors, meta = read_safetensors(src)
    writer = w.GGUFWriter(os.path.join(out, "ltx23_tiny.gguf"), arch="ltxv")
    writer.add_quantization_version(c.GGML_QUANT_VERSION)
    writer.add_file_type(c.LlamaFileType.MOSTLY_Q4_0)
    for k in sorted(meta):
        writer.add_string(k, meta[k])
    prefix = "model.diffusion_model."
    for name in sorted(tensors):
        data = tensors[name]
        key = name[len(prefix):] if name.startswith(prefix) else name
        if data.ndim == 1 or data.size <= 1024 or "scale_shift_table" in key:
            qtype = T.F32
        elif key.startswith("transformer_blocks.0."):
            qtype = T.Q8_0
        else:
            qtype = T.Q4_0
        if qtype != T.F32 and data.shape[-1] % 32 != 0:
            qtype = T.F32
        writer.add_tensor(key, q.quantize(data, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = os.path.join(here, "..", "..", "tests", "fixtures")
    ap.add_argument("--out", default=os.path.join(fixtures, "gguf"))
    ap.add_argument("--ltx-source", default=os.path.join(fixtures, "ltx23.weights.bf16.safetensors"))
    args = ap.parse_args()
    mods = load_gguf_py(args.gguf_py)
    os.makedirs(args.out, exist_ok=True)
    gen_blocks(args.out, mods)
    gen_metadata(args.out, mods)
    gen_ltx(args.out, mods, args.ltx_source)


if __name__ == "__main__":
    main()
