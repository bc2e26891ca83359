#!/usr/bin/env python
"""Throughput of xllm's engine on a model with random weights (no download), optionally with the CUDA runner (kernels + CUDA
graphs) attached to the engine: the same measurement as `xllm bench --random-weights`, plus the runner. Prints one JSON line.

    python scripts/bench_xllm.py --random-weights llama2-7b --file bench/hello.txt --batch 200 --max-tokens 18 --device cuda --runner graphs
"""
import argparse, json, sys, time
from pathlib import Path
import torch
from xllm.cli import random_llm, run_bench

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--random-weights", required=True, metavar="CONFIG")
p.add_argument("--file", required=True)
p.add_argument("--batch", type=int, required=True)
p.add_argument("--max-tokens", type=int, required=True)
p.add_argument("--device", default="cpu")
p.add_argument("--dtype", default="float16")
p.add_argument("--tokenizer", default=None)
p.add_argument("--kv-cache-memory", type=int, default=None, help="bytes (default: xllm's per-device default)")
p.add_argument("--runner", choices=["none", "eager", "graphs"], default="none", help="forward_paged only, or xllm.cuda_runner eager / with CUDA graphs")
p.add_argument("--json", default=None)
a = p.parse_args()

prompts = [l.strip() for l in Path(a.file).read_text(encoding="utf-8").splitlines() if l.strip()]
prompts = (prompts * -(-a.batch // len(prompts)))[:a.batch]
t0 = time.perf_counter()
llm = random_llm(a.random_weights, a.device, a.dtype, a.tokenizer, max_num_seqs=a.batch, kv_cache_memory=a.kv_cache_memory)
build_s = time.perf_counter() - t0
capture_s, runner = 0.0, None
if a.runner != "none":
    from xllm.cuda_runner import CudaRunner
    eng = llm.get_engine()
    t0 = time.perf_counter()
    runner = eng.runner = CudaRunner(llm.model, eng.pool, max_batch=a.batch, max_model_len=eng.max_model_len, enforce_eager=a.runner == "eager")
    if a.runner == "graphs": runner.capture()
    capture_s = time.perf_counter() - t0
r = run_bench(llm, prompts, a.max_tokens, ignore_eos=True, progress=False)
r.update(config=a.random_weights, device=a.device, dtype=a.dtype, runner=a.runner, runner_repr=repr(runner), build_s=build_s, capture_s=capture_s,
         runner_steps=None if runner is None else dict(graph=runner.num_graph_steps, eager=runner.num_eager_steps, fallback=runner.num_fallback_steps),
         weight_bytes=sum(t.numel() * t.element_size() for t in llm.model.state_dict().values()))
if a.device.startswith("cuda"): r["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
line = json.dumps(r)
print(line)
if a.json: Path(a.json).write_text(line + "\n")
