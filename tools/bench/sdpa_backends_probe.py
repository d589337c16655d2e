#!/usr/bin/env python3
"""Times PyTorch's fused attention backends (cuDNN, FlashAttention-2, memory-efficient) on the
transformer's attention shapes, as `ltx bench kernels --filter step-kernels` times its own
kernels: bf16, q/k/v as [B, T, H, D] viewed as
[B, H, T, D], no mask, one warm-up then the mean of `reps` calls. Needs only torch with CUDA.

    python3 tools/bench/sdpa_backends_probe.py [--json out.json]
"""
import argparse
import json
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

CASES = [
    ("video self", 32, 6144, 6144, 128),
    ("video text", 32, 6144, 1024, 128),
    ("audio self", 32, 126, 126, 64),
    ("video self 1536", 32, 24576, 24576, 128),
    ("video text 1536", 32, 24576, 1024, 128),
]
BACKENDS = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.manual_seed(0)
    results = []
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    for name, h, tq, tk, d in CASES:
        q = torch.rand(1, tq, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        k = torch.rand(1, tk, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        v = torch.rand(1, tk, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        flops = 4.0 * h * tq * tk * d
        reps = 3 if tq * tk > 1e8 else 20
        for bname, backend in BACKENDS:
            try:
                with sdpa_kernel([backend]):
                    F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(d))
                    torch.cuda.synchronize()
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    for _ in range(reps):
                        F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(d))
                    e1.record()
                    torch.cuda.synchronize()
                ms = e0.elapsed_time(e1) / reps
                print(f"[torch] attention {name:16s} {bname:9s} {ms:8.3f} ms  {flops / ms / 1e9:6.1f} TFLOP/s")
                results.append({"case": name, "backend": bname, "ms": ms, "tflops": flops / ms / 1e9})
            except RuntimeError as e:  # a backend that does not take the shape
                print(f"[torch] attention {name:16s} {bname:9s} unavailable: {str(e).splitlines()[0][:80]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
