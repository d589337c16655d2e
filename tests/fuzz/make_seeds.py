#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) from the test fixtures.

Run from the repository root: python3 tests/fuzz/make_seeds.py. Needs the ffmpeg command line
(scripts/install-deps) for the image, EXR and media seeds. The seeds are small on purpose (the
fuzzer mutates them thousands of times a second): safetensors files keep their headers with every
tensor shrunk, media files are a few frames at 32x32. Re-running rewrites the seeds it makes and
leaves the inputs `scripts/fuzz --merge` added (named by their SHA-1) alone.
"""
import io
import json
import os
import struct
import subprocess
import tarfile
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")
DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8,
              "I32": 4, "I8": 1, "U8": 1, "BOOL": 1}


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def safetensors(header_entries, metadata=None, keep=None):
    """A valid file: the entries' names and dtypes; shapes shrunk to at most `keep` elements per
    dimension (None: as given), data zeros (or the given bytes)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, e in header_entries.items():
        shape = [min(d, keep) for d in e["shape"]] if keep else e["shape"]
        n = DTYPE_SIZE[e["dtype"]]
        for d in shape:
            n *= d
        data = e.get("data", bytes(n))
        header[name] = {"dtype": e["dtype"], "shape": shape, "data_offsets": [offset, offset + n]}
        blobs.append(data)
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def shrunk(path, keep=2, max_tensors=120):
    h = read_header(path)
    meta = h.pop("__metadata__", None)
    entries = dict(list(h.items())[:max_tensors])
    return safetensors(entries, meta, keep)


def ffmpeg(args, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out" + suffix)
        subprocess.run(["ffmpeg", "-v", "error", "-y"] + args + [out], check=True)
        with open(out, "rb") as f:
            return f.read()


def seeds_safetensors():
    put("safetensors", "empty_header.safetensors", safetensors({}))
    put("safetensors", "metadata_only.safetensors",
        safetensors({}, {"model_version": "2.3.0", "config": "{\"transformer\": {}}"}))
    put("safetensors", "every_dtype.safetensors",
        safetensors({f"t.{d.lower()}": {"dtype": d, "shape": [2, 3]} for d in DTYPE_SIZE}))
    put("safetensors", "empty_tensor.safetensors",
        safetensors({"a": {"dtype": "F32", "shape": [0, 4]}, "b": {"dtype": "BF16", "shape": []}}))
    for name in ["e2e/ltx23_tiny.safetensors", "text_gemma4.te.safetensors",
                 "vae_ltx23.weights.safetensors", "audio_ltx23.weights.safetensors",
                 "upsampler_x2.weights.safetensors", "duration_ltx25.weights.safetensors",
                 "diffdec_ltx25.weights.safetensors", "ltx23.fp8_scaled.weights.safetensors",
                 "lora_ltx23.user.safetensors", "text_ltx25.transformer.safetensors"]:
        put("safetensors", os.path.basename(name), shrunk(os.path.join(FIX, name)))


def seeds_model_config():
    seen = set()
    for name in sorted(os.listdir(FIX)) + ["e2e/" + n for n in sorted(os.listdir(FIX + "/e2e"))]:
        if not name.endswith(".safetensors"):
            continue
        meta = read_header(os.path.join(FIX, name)).get("__metadata__") or {}
        if "config" not in meta or meta["config"] in seen:
            continue
        seen.add(meta["config"])
        version = meta.get("model_version", "")
        put("model_config", os.path.basename(name).replace(".safetensors", ".txt"),
            meta["config"] + "\0" + version)
    with open(os.path.join(FIX, "text_gemma3_root", "config.json")) as f:
        put("model_config", "gemma3_config.txt", f.read() + "\0")


def seeds_diffusers_config():
    """The tiny checkpoint's config as the config.json files a Diffusers pipeline has (the names
    diffusers' LTX-2 models take; tests/support/layout_writers.h writes the same)."""
    cfg = json.loads(read_header(os.path.join(FIX, "e2e/ltx23_tiny.safetensors"))["__metadata__"]["config"])
    t, v, a, voc = cfg["transformer"], cfg["vae"], cfg["audio_vae"], cfg["vocoder"]
    same = ["num_attention_heads", "attention_head_dim", "in_channels", "out_channels", "num_layers",
            "cross_attention_dim", "norm_eps", "caption_channels", "audio_num_attention_heads",
            "audio_attention_head_dim", "audio_in_channels", "audio_out_channels",
            "audio_cross_attention_dim", "timestep_scale_multiplier", "activation_fn",
            "attention_bias", "norm_elementwise_affine", "rope_type"]
    tr = {k: t[k] for k in same if k in t}
    tr.update({"_class_name": "LTX2VideoTransformer3DModel", "qk_norm": "rms_norm_across_heads",
               "rope_theta": t["positional_embedding_theta"],
               "pos_embed_max_pos": t["positional_embedding_max_pos"][0],
               "base_height": t["positional_embedding_max_pos"][1],
               "base_width": t["positional_embedding_max_pos"][2],
               "audio_pos_embed_max_pos": t["audio_positional_embedding_max_pos"][0],
               "rope_double_precision": t["frequencies_precision"] == "float64",
               "gated_attn": t["apply_gated_attention"], "audio_gated_attn": t["apply_gated_attention"],
               "cross_attn_mod": t["cross_attention_adaln"],
               "audio_cross_attn_mod": t["cross_attention_adaln"],
               "cross_attn_timestep_scale_multiplier": t["av_ca_timestep_scale_multiplier"]})
    co = {"_class_name": "LTX2TextConnectors", "caption_channels": t["caption_channels"],
          "video_connector_num_attention_heads": t["connector_num_attention_heads"],
          "video_connector_attention_head_dim": t["connector_attention_head_dim"],
          "video_connector_num_layers": t["connector_num_layers"],
          "audio_connector_num_attention_heads": t["audio_connector_num_attention_heads"],
          "audio_connector_attention_head_dim": t["audio_connector_attention_head_dim"],
          "audio_connector_num_layers": t["connector_num_layers"],
          "video_gated_attn": t["connector_apply_gated_attention"],
          "audio_gated_attn": t["connector_apply_gated_attention"],
          "connector_rope_base_seq_len": t["connector_positional_embedding_max_pos"][0],
          "rope_type": t["rope_type"], "rope_double_precision": True,
          "per_modality_projections": True}
    kind = {"space": "spatial", "time": "temporal", "all": "spatiotemporal"}
    enc_layers, enc_out, down, ch = [], [], [], v["latent_channels"]
    for name, p in v["encoder_blocks"]:
        if name == "res_x":
            enc_layers.append(p["num_layers"])
        else:
            ch *= p.get("multiplier", 2)
            enc_out.append(ch)
            down.append(kind[name.split("_")[1]])
    dec_layers, dec_out, up, factor, res, w = [], [], [], [], [], v["decoder_base_channels"]
    for name, p in v["decoder_blocks"]:
        if name == "res_x":
            dec_layers.append(p["num_layers"])
        else:
            w *= p.get("multiplier", 1)
            dec_out.append(w)
            up.append(kind[name.split("_")[1]])
            factor.append(p.get("multiplier", 1))
            res.append(p.get("residual", False))
    va = {"_class_name": "AutoencoderKLLTX2Video", "latent_channels": v["latent_channels"],
          "block_out_channels": enc_out, "layers_per_block": enc_layers, "downsample_type": down,
          "decoder_block_out_channels": dec_out, "decoder_layers_per_block": dec_layers,
          "upsample_type": up, "upsample_factor": factor, "upsample_residual": res,
          "patch_size": v["patch_size"], "timestep_conditioning": v["timestep_conditioning"]}
    dd = a["model"]["params"]["ddconfig"]
    au = {"_class_name": "AutoencoderKLLTX2Audio", "base_channels": dd["ch"],
          "output_channels": dd["out_ch"], "ch_mult": dd["ch_mult"],
          "num_res_blocks": dd["num_res_blocks"], "latent_channels": dd["z_channels"],
          "mel_bins": dd["mel_bins"], "sample_rate": a["model"]["params"]["sampling_rate"]}
    vo = {"_class_name": "LTX2VocoderWithBWE"}
    for pre, g in (("", voc["vocoder"]), ("bwe_", voc["bwe"])):
        vo.update({pre + "hidden_channels": g["upsample_initial_channel"],
                   pre + "upsample_factors": g["upsample_rates"],
                   pre + "upsample_kernel_sizes": g["upsample_kernel_sizes"],
                   pre + "resnet_kernel_sizes": g["resblock_kernel_sizes"],
                   pre + "resnet_dilations": g["resblock_dilation_sizes"],
                   pre + "final_bias": g["use_bias_at_final"]})
    b = voc["bwe"]
    vo.update({"input_sampling_rate": b["input_sampling_rate"],
               "output_sampling_rate": b["output_sampling_rate"], "hop_length": b["hop_length"],
               "filter_length": b["n_fft"], "num_mel_channels": b["num_mels"]})
    parts = [tr, co, va, au, vo]
    put("diffusers_config", "ltx23_tiny.txt", "\0".join(json.dumps(x) for x in parts))
    put("diffusers_config", "transformer_only.txt", json.dumps(tr))
    # LTX-2.5: the diffusion decoder fixture's config.vae as LTX2VideoDiffusionDecoderModel's.
    dv = json.loads(read_header(os.path.join(FIX, "diffdec_ltx25.weights.safetensors"))["__metadata__"]["config"])["vae"]
    dec = dv["decoder"]
    ddc = {"_class_name": "LTX2VideoDiffusionDecoderModel", "out_channels": dec["out_channels"],
           "latent_channels": dec["in_channels"], "patch_size": dec["patch_size"],
           "decoder_head_dim": dec["head_dim"], "decoder_stage_channels": dec["stage_channels"],
           "decoder_stage_depths": dec["stage_depths"],
           "decoder_stage_kernels": dec["stage_kernels"][:-1],
           "decoder_upsample_strides": [u[0] for u in dec["upsamples"]],
           "decoder_upsample_channel_reductions": [u[1] for u in dec["upsamples"]],
           "decoder_stage5_kernel": dec["stage5_kernel"], "decoder_t_emb_dim": dec["t_emb_dim"],
           "decoder_timestep_scale_multiplier": dec["timestep_scale_multiplier"],
           "decoder_model_output_type": dv["model_output_type"],
           "decoder_num_inference_steps": dec["default_num_inference_steps"]}
    put("diffusers_config", "ltx25_tiny.txt", "\0".join(json.dumps(x) for x in parts + [ddc]))


def seeds_tokenizer():
    for fam in ("gemma3", "gemma4"):
        with open(os.path.join(FIX, f"text_tokenizer_{fam}.json")) as f:
            tok = f.read()
        put("tokenizer", f"{fam}_prompt.txt",
            tok + "\0  A red fox runs through fresh snow at dawn, <start_of_turn>  \u00e9\u4e16\U0001F98A ")
    # A small file with every feature the reader accepts, so mutations start from all of them.
    small = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": 0, "content": "<pad>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 1, "content": "<bos>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 2, "content": "<eos>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 3, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 12, "content": " word", "single_word": True, "lstrip": True, "rstrip": True,
             "normalized": True, "special": False},
        ],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            {"type": "Strip", "strip_left": False, "strip_right": True}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": "\u2581"}, "behavior": "MergedWithPrevious",
             "invert": False},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
             "split": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [1],
                                                        "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3, "\u2581": 4, "a": 5,
                            "b": 6, "ab": 7, "\u2581a": 8, "\u2581ab": 9, "<0x41>": 10,
                            "<0xC3>": 11},
                  "merges": [["a", "b"], ["\u2581", "a"], ["\u2581a", "b"]]},
    }
    put("tokenizer", "small_all_features.txt", json.dumps(small) + "\0ab aab A \u00c3 word ba")
    small["model"]["merges"] = ["a b", "\u2581 a", "\u2581a b"]  # the older merges serialisation
    put("tokenizer", "small_string_merges.txt", json.dumps(small) + "\0 ab  ab")
    cases = json.load(open(os.path.join(FIX, "text_tokenizer_cases.json")))
    put("tokenizer", "small_train_text.txt", json.dumps(small) + "\0" + cases["train_text"][:400])


def seeds_chat_template():
    root = os.path.join(FIX, "text_gemma3_root")
    cfg = open(os.path.join(root, "tokenizer_config.json")).read()
    tmpl3 = open(os.path.join(root, "chat_template.jinja")).read()
    system = "You are a prompt enhancer. Describe the video in detail."
    user = "  a cat \u201cjumps\u201d \u2014 over a fence\u00a0 "
    put("chat_template", "gemma3_jinja.txt", "\0".join([cfg, tmpl3, "", system, user]))
    cfg_obj = json.loads(cfg)
    cfg_obj["chat_template"] = tmpl3
    put("chat_template", "gemma3_config_entry.txt",
        "\0".join([json.dumps(cfg_obj), "", "", system, user]))
    cfg_obj["chat_template"] = [{"name": "default", "template": tmpl3}]
    put("chat_template", "gemma3_config_list.txt",
        "\0".join([json.dumps(cfg_obj), "", "", system, user]))
    tmpl4 = ("{{ bos_token }}<|turn>system\n...<turn|>\n{%- if add_generation_prompt -%}"
             "<|turn>model\n{%- if not enable_thinking -%}<|channel>thought\\n<channel|>{%- endif -%}"
             "{%- endif -%}")
    put("chat_template", "gemma4_json.txt",
        "\0".join(["", "", json.dumps({"chat_template": tmpl4}), system, user]))
    put("chat_template", "not_gemma.txt", "\0".join(["", "{{ messages }}", "", system, user]))


def seeds_lora():
    for name in ["lora_ltx23.user.safetensors", "lora_ltx23.distilled.safetensors",
                 "e2e/ltx23_tiny_ic_lora.safetensors", "e2e/ltx23_tiny_hdr_lora.safetensors"]:
        path = os.path.join(FIX, name)
        data = open(path, "rb").read()
        put("lora", os.path.basename(name), data if len(data) < 20000 else shrunk(path, keep=4))
    put("lora", "alpha_and_prefix.safetensors", safetensors({
        "diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight": {"dtype": "BF16", "shape": [2, 4]},
        "diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight": {"dtype": "BF16", "shape": [4, 2]},
        "diffusion_model.transformer_blocks.0.attn1.to_q.alpha": {
            "dtype": "F32", "shape": [], "data": struct.pack("<f", 2.0)},
        "transformer_blocks.0.ff.net.0.proj.lora_A.weight": {"dtype": "F8_E4M3", "shape": [1, 3]},
        "transformer_blocks.0.ff.net.0.proj.lora_B.weight": {"dtype": "F16", "shape": [5, 1]},
    }))


def seeds_image():
    src = ["-f", "lavfi", "-i", "testsrc2=size=24x16:rate=1", "-frames:v", "1"]
    put("image", "rgb.png", ffmpeg(src, ".png"))
    put("image", "gray.png", ffmpeg(src + ["-pix_fmt", "gray"], ".png"))
    put("image", "rgba.png", ffmpeg(src + ["-pix_fmt", "rgba"], ".png"))
    put("image", "rgb48.png", ffmpeg(src + ["-pix_fmt", "rgb48be"], ".png"))
    put("image", "palette.png", ffmpeg(src + ["-pix_fmt", "pal8"], ".png"))
    put("image", "monob.png", ffmpeg(src + ["-pix_fmt", "monob"], ".png"))
    jpeg = ffmpeg(src + ["-pix_fmt", "yuvj420p"], ".jpg")
    put("image", "yuv420.jpg", jpeg)
    put("image", "gray.jpg", ffmpeg(src + ["-pix_fmt", "gray"], ".jpg"))
    # EXIF orientation 6 (an APP1 after SOI) and an XMP packet.
    tiff = b"MM\0*\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0"
    app1 = b"Exif\0\0" + tiff
    put("image", "exif_rot6.jpg", jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpeg[2:])
    xmp = b"http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><rdf:Description tiff:Orientation=\"3\"/></x:xmpmeta>"
    put("image", "xmp_rot3.jpg", jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(xmp) + 2) + xmp + jpeg[2:])
    put("image", "data_url.txt",
        "data:image/png;base64," + __import__("base64").b64encode(ffmpeg(src, ".png")).decode())
    with open(os.path.join(FIX, "gemma_vision.png"), "rb") as f:
        data = f.read()
    if len(data) < 100_000:
        put("image", "gemma_vision.png", data)


def seeds_exr():
    src = ["-f", "lavfi", "-i", "testsrc2=size=16x8:rate=1", "-frames:v", "1"]
    put("exr", "half_zip.exr", ffmpeg(src + ["-pix_fmt", "gbrpf32le", "-c:v", "exr",
                                             "-compression", "zip1", "-format", "half"], ".exr"))
    put("exr", "float_none.exr", ffmpeg(src + ["-pix_fmt", "gbrpf32le", "-c:v", "exr",
                                               "-compression", "none", "-format", "float"], ".exr"))
    put("exr", "gray_rle.exr", ffmpeg(src + ["-pix_fmt", "grayf32le", "-c:v", "exr",
                                             "-compression", "rle"], ".exr"))


def seeds_exr_frames():
    # Archives of two 16x8 frames as GNU tar, POSIX ustar and pax write them; one also with a
    # folder, a hidden macOS "._" file and a frame of another size (refused).
    frame = ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=16x8:rate=1", "-frames:v", "1",
                    "-pix_fmt", "gbrpf32le", "-c:v", "exr", "-compression", "zip1",
                    "-format", "half"], ".exr")
    other = ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=8x8:rate=1", "-frames:v", "1",
                    "-pix_fmt", "gbrpf32le", "-c:v", "exr", "-compression", "rle"], ".exr")

    def archive(fmt, members):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.mtime = 0
                if data is None:
                    info.type = tarfile.DIRTYPE
                    t.addfile(info)
                else:
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        # Without the block padding past the two end-of-archive blocks: smaller seeds.
        data = buf.getvalue().rstrip(b"\0")
        return data + b"\0" * (-len(data) % 512 + 1024)

    two = [("frame_0001.exr", frame), ("frame_0002.exr", frame)]
    put("exr_frames", "gnu.tar", archive(tarfile.GNU_FORMAT, two))
    put("exr_frames", "ustar.tar", archive(tarfile.USTAR_FORMAT, two))
    # Python writes a pax record only where ustar cannot hold a field: a path past 100 bytes.
    deep = "shot_" + "x" * 100 + "/"
    put("exr_frames", "pax.tar", archive(tarfile.PAX_FORMAT, [(deep + n, d) for n, d in two]))
    put("exr_frames", "nested.tar", archive(tarfile.GNU_FORMAT, [
        ("clip/", None), ("clip/._frame_0001.exr", b"\0\5\26\7"), ("clip/frame_0001.exr", frame),
        ("clip/frame_0002.exr", other)]))


def seeds_media():
    v = ["-f", "lavfi", "-i", "testsrc2=size=32x32:rate=8", "-t", "0.5"]
    a = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000", "-t", "0.5"]
    put("media", "h264_aac.mp4", ffmpeg(v + a + ["-c:v", "libx264", "-preset", "ultrafast",
                                                 "-pix_fmt", "yuv420p", "-c:a", "aac", "-ac", "2"],
                                        ".mp4"))
    put("media", "mjpeg.avi", ffmpeg(v + ["-c:v", "mjpeg", "-pix_fmt", "yuvj420p"], ".avi"))
    put("media", "s16_stereo.wav", ffmpeg(a + ["-ac", "2", "-c:a", "pcm_s16le"], ".wav"))
    put("media", "u8_mono.wav", ffmpeg(a + ["-c:a", "pcm_u8"], ".wav"))
    put("media", "f32.wav", ffmpeg(a + ["-c:a", "pcm_f32le"], ".wav"))
    put("media", "flac.flac", ffmpeg(a + ["-ac", "2"], ".flac"))
    put("media", "png_frames.mkv", ffmpeg(v + ["-c:v", "png"], ".mkv"))


def seeds_gguf():
    # gguf-py's files (tools/parity/gen_gguf_fixtures.py): every metadata value type, and a
    # tensor of every GGML type the reader dequantises. Both are small enough to use whole.
    for name in ("metadata.gguf", "blocks.gguf"):
        with open(os.path.join(FIX, "gguf", name), "rb") as f:
            put("gguf", name, f.read())


def seeds_server_request():
    put("server_request", "json_minimal.txt", json.dumps({"prompt": "a fox", "model": "ltx-demo"}))
    put("server_request", "json_full.txt", json.dumps({
        "prompt": "a fox in snow", "negative_prompt": "blur", "model": "ltx-demo",
        "pipeline": "two-stage", "size": "256x128", "seconds": "1", "fps": 24, "seed": 7,
        "num_inference_steps": 2, "guidance_scale": 3.0, "generate_audio": False,
        "loras": [{"name": "style", "strength": 0.5}],
        "input_reference": "data:image/png;base64,AAAA"}))
    put("server_request", "json_t2a.txt", json.dumps(
        {"prompt": "rain", "pipeline": "t2a", "num_frames": 17, "auto_duration": True}))
    put("server_request", "json_retake.txt", json.dumps(
        {"prompt": "x", "pipeline": "retake", "start_time": 0.1, "end_time": 0.3}))
    png = ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=32x32:rate=1", "-frames:v", "1"], ".png")
    parts = [("prompt", "", "", b"a fox"), ("size", "", "", b"128x128"), ("seconds", "", "", b"1"),
             ("images[][frame_index]", "", "", b"0"), ("images[][strength]", "", "", b"0.8"),
             ("images[][image]", "ref.png", "image/png", png), ("loras[0][name]", "", "", b"style"),
             ("loras[0][strength]", "", "", b"1.5")]
    body = b"form\n" + b"\0".join(n.encode() + b"\n" + f.encode() + b"\n" + t.encode() + b"\n" + c
                                  for n, f, t, c in parts)
    put("server_request", "form_images.txt", body)
    wav = ffmpeg(["-f", "lavfi", "-i", "sine=sample_rate=8000", "-t", "0.5", "-ac", "2"], ".wav")
    parts = [("prompt", "", "", b"a drum"), ("pipeline", "", "", b"a2vid"),
             ("audio_path", "beat.wav", "audio/wav", wav), ("size", "", "", b"128x128")]
    body = b"form\n" + b"\0".join(n.encode() + b"\n" + f.encode() + b"\n" + t.encode() + b"\n" + c
                                  for n, f, t, c in parts)
    put("server_request", "form_a2vid.txt", body)


if __name__ == "__main__":
    seeds_safetensors()
    seeds_model_config()
    seeds_diffusers_config()
    seeds_tokenizer()
    seeds_chat_template()
    seeds_lora()
    seeds_image()
    seeds_exr()
    seeds_exr_frames()
    seeds_media()
    seeds_server_request()
    seeds_gguf()
    for t in sorted(os.listdir(OUT)):
        files = os.listdir(os.path.join(OUT, t))
        size = sum(os.path.getsize(os.path.join(OUT, t, f)) for f in files)
        print(f"{t}: {len(files)} seeds, {size // 1024} KB")
