#!/usr/bin/env python
"""gpu_check.sh's `env` section: fails fast (exit 1, naming what is missing) when the machine cannot run the other sections.
- every module they import: xllm (engine, CUDA runner, server, grammar, tensor parallelism), fastcore, fastapi, uvicorn,
  pydantic, starlette, llguidance, openai, gguf, transformers, pytest; their versions;
- the requirements of every distribution in SITE (the carried wheels, installed there by gpu_check.sh) against what is
  installed: the image's versions are not all recorded where the wheels were chosen (scripts/gpu_wheels.sh);
- on cuda: torch sees the GPU, CuPy imports, NVRTC builds the kernels (timed: a Llama-2-7B runner's part, then the rest;
  CuPy's disk cache keeps them for the later sections), and one real kernel launch (rms_norm, fp16) against float64;
- `--device cpu` (dry run): the same launch in the CUDA emulator (notebook 16a) when a C++ compiler is there.
    python scripts/gpu_env.py [--device cuda|cpu] [--site DIR]"""
import argparse, importlib, importlib.metadata as md, shutil, sys, time

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--device", default="cuda")
ap.add_argument("--site", default=None, help="the folder the carried wheels were installed into")
a = ap.parse_args()

MODULES = ("torch numpy fastcore fastapi uvicorn pydantic starlette llguidance openai gguf transformers pytest "
           "xllm xllm.engine xllm.cuda_runner xllm.server xllm.grammar xllm.parallel xllm.cli").split()
missing = []
for m in MODULES:
    try: mod = importlib.import_module(m)
    except Exception as e: missing.append(f"{m} ({type(e).__name__}: {e})"); continue
    if "." in m: continue
    try: v = getattr(mod, "__version__", None) or md.version(m)
    except md.PackageNotFoundError: v = "?"
    print(m, v)
if missing: sys.exit("MISSING, the sections that import them would fail: " + "; ".join(missing)
                     + " (on the GPU machine: make the wheels with scripts/gpu_wheels.sh where PyPI is reachable, and carry .whl)")

if a.site:                                                   # the carried wheels' requirements, met by what is installed here
    from packaging.requirements import Requirement
    bad = []
    for d in md.distributions(path=[a.site]):
        for r in map(Requirement, d.requires or []):
            if r.marker is not None and not r.marker.evaluate({"extra": ""}): continue
            try: v = md.version(r.name)
            except md.PackageNotFoundError: bad.append(f"{d.metadata['Name']} needs {r}: not installed"); continue
            if not r.specifier.contains(v, prereleases=True): bad.append(f"{d.metadata['Name']} needs {r}, found {v}")
    if bad: sys.exit("the carried wheels' requirements are not met:\n  " + "\n  ".join(bad))
    print(f"carried wheels in {a.site}: every requirement met")

import torch
import xllm.cuda_kernels as ck
if a.device.startswith("cuda"):
    if not torch.cuda.is_available(): sys.exit(f"torch {torch.__version__} sees no GPU")
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
    if not ck.cupy_available(): sys.exit("CuPy does not import: the image should have cupy-cuda13x (pip install 'xllm[cuda13]' elsewhere)")
    import cupy
    print("cupy", cupy.__version__, "CUDA runtime", cupy.cuda.runtime.runtimeGetVersion())
    from xllm.stand_ins import random_config
    t = time.perf_counter(); n = ck.load_kernels("cuda", ck.model_kernel_names(random_config("llama2-7b"))); s1 = time.perf_counter() - t
    t = time.perf_counter(); m = ck.load_kernels("cuda"); s2 = time.perf_counter() - t
    print(f"NVRTC build: {n} kernels of a llama2-7b runner {s1:.1f} s (first start), then the other {m - n} {s2:.1f} s")
    where, ctx = "the GPU", None
else:
    if shutil.which("g++") is None:
        print("dry run: no C++ compiler, no kernel launched"); sys.exit(0)
    from xllm.cuda_emu import emulate
    where, ctx = "the CUDA emulator (dry run)", emulate()
    ctx.__enter__()
g = torch.Generator(device=a.device).manual_seed(0)
x = torch.randn(64, 4096, generator=g, device=a.device).half()
w = torch.randn(4096, generator=g, device=a.device).half()
y = ck.rms_norm(x, w, 1e-5)
if a.device.startswith("cuda"): torch.cuda.synchronize()
xd = x.double()
ref = w.double() * xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-5)
err = ck.max_rel_err(y, ref)
if ctx is not None: ctx.__exit__(None, None, None)
print(f"one kernel on {where}: rms_norm [64,4096] fp16, max relative error {err:.1e} against float64")
if not err < 1e-2: sys.exit(f"rms_norm's error {err:.1e} is over 1e-2")
