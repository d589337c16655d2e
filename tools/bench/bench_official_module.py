"""bench_official.py imported as a module, for the other official benchmarks (official_pipeline.py,
official_quantized_step.py), which reuse its media stubs, its reference path and its helpers.

At import bench_official.py opens $OUT/bench_official.txt for writing; it is pointed at a scratch
folder meanwhile, so the importer's own output folder is never touched."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile


def import_bench_official(path: str, required: tuple[str, ...], scratch_prefix: str):  # noqa: ANN201
    """The module at `path` (registered as "bench_official") and the scratch folder its import wrote
    to; AttributeError naming the first of `required` it lacks."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (the official benchmark bench_official.py)")
    scratch = tempfile.mkdtemp(prefix=scratch_prefix)
    saved = os.environ.get("OUT")
    os.environ["OUT"] = scratch
    try:
        spec = importlib.util.spec_from_file_location("bench_official", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["bench_official"] = mod
        spec.loader.exec_module(mod)
    finally:
        if saved is None:
            os.environ.pop("OUT", None)
        else:
            os.environ["OUT"] = saved
    for name in required:
        if not hasattr(mod, name):
            raise AttributeError(f"{path} has no {name}; expected shared/tools/bench_official.py")
    return mod, scratch
