#!/usr/bin/env python3
"""The OFFICIAL LTX-2 v1.2.0 stack's load of a checkpoint, for `ltx bench cold-start`'s comparison.

Run as a fresh process on the files `ltx bench write-models` wrote (the same single-file
checkpoint our run loads). Reports, in seconds since this process started:

  import      torch and the reference's loader / transformer modules imported
  cuda_init   the first CUDA context (torch.cuda.init + one tiny allocation)
  transformer ltx_core's SingleGPUModelBuilder(LTXModelConfigurator, the checkpoint,
              LTXV_MODEL_COMFY_RENAMING_MAP).build(device=cuda, dtype=bf16), synchronised: what
              ltx-pipelines' DiffusionStage builds before its first denoising step (no
              quantization, no LoRA, no compile)

The official pipelines' Gemma loader reads a Hugging Face folder (model-*.safetensors shards +
tokenizer), which `ltx bench write-models` does not write, so the text encoder is not compared here.

Usage (CUDA machine with PyTorch; reference source in $LTX_REF, else <repo>/.ref):
  python3 tools/bench/official_cold_start.py CHECKPOINT [--runs N] [--out FILE.json]
Each run is a child process of this script, so every run pays its own imports and CUDA start.
"""

from __future__ import annotations

import time

T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child(checkpoint: str) -> dict:
    ref = os.environ.get("LTX_REF") or os.path.join(REPO_ROOT, ".ref")
    for pkg in ("ltx-pipelines", "ltx-core"):
        sys.path.insert(0, os.path.join(ref, "packages", pkg, "src"))
    import torch  # noqa: PLC0415
    from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder  # noqa: PLC0415
    from ltx_core.model.transformer.model_configurator import (  # noqa: PLC0415
        LTXV_MODEL_COMFY_RENAMING_MAP,
        LTXModelConfigurator,
    )

    out = {"import": time.time() - T0}
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    out["cuda_init"] = time.time() - T0
    builder = SingleGPUModelBuilder(
        model_class_configurator=LTXModelConfigurator,
        model_path=checkpoint,
        model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP,
    )
    model = builder.build(device=torch.device("cuda"), dtype=torch.bfloat16)
    torch.cuda.synchronize()
    out["transformer"] = time.time() - T0
    out["transformer_params"] = sum(p.numel() for p in model.parameters())
    out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    out["torch"] = torch.__version__
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not os.path.isfile(args.checkpoint):
        print(f"official_cold_start: {args.checkpoint}: no such file (write it with `ltx bench write-models`)",
              file=sys.stderr)
        return 2
    if args.child:
        print(json.dumps(child(args.checkpoint)))
        return 0
    runs = []
    for i in range(args.runs):
        t = time.time()
        p = subprocess.run([sys.executable, os.path.abspath(__file__), args.checkpoint, "--child"],
                           capture_output=True, text=True, check=False)
        wall = time.time() - t
        if p.returncode != 0:
            print(p.stdout, p.stderr, sep="\n", file=sys.stderr)
            return p.returncode
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["wall"] = wall
        runs.append(r)
        print(f"official run {i + 1}: import {r['import']:.2f} s, CUDA {r['cuda_init']:.2f} s, transformer built "
              f"{r['transformer']:.2f} s after the process started ({r['transformer_params'] / 1e9:.2f} B params, "
              f"peak {r['peak_gib']:.1f} GiB, torch {r['torch']})", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"checkpoint": args.checkpoint, "runs": runs}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
