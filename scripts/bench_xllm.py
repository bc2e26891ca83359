#!/usr/bin/env python
"""Throughput of xllm's engine on a model with random weights (no download), for several workloads in one process (one model,
one engine sized for the largest batch), optionally with the CUDA runner (kernels + CUDA graphs) attached to the engine.
Each workload is FILE:BATCH:MAX_TOKENS (EOS ignored); prints one JSON line per workload (run_bench's fields + the runner's).

    python scripts/bench_xllm.py --random-weights llama2-7b --device cuda --runner graphs \\
        --workload bench/hello.txt:200:18 --workload bench/prompts.txt:48:512 --workload bench/prompts.txt:1:128
"""
import argparse, json, time
from pathlib import Path
import torch
from xllm.cli import random_llm, run_bench

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--random-weights", required=True, metavar="CONFIG")
p.add_argument("--workload", action="append", required=True, metavar="FILE:BATCH:MAX_TOKENS")
p.add_argument("--device", default="cpu")
p.add_argument("--dtype", default="float16")
p.add_argument("--tokenizer", default=None)
p.add_argument("--kv-cache-memory", type=int, default=None, help="bytes (default: xllm's per-device default)")
p.add_argument("--kv-cache-dtype", default=None, choices=["int8"], help="int8: the K/V pool stored as int8 codes + per-row scales")
p.add_argument("--runner", choices=["none", "eager", "graphs"], default="none", help="the engine's default runner for the device, or the CUDA runner eager / with CUDA graphs")
p.add_argument("--kernel-chunk-tokens", type=int, default=None, help="CudaRunner.kernel_chunk_tokens: prompt chunks up to this long attend through the paged kernel")
p.add_argument("--quantization", choices=["int8", "int4"], default=None, help="quantize the random model's layers (xllm.quant.quantize_model, groups of --group-size)")
p.add_argument("--group-size", type=int, default=32)
p.add_argument("--json", default=None, help="append the JSON lines to this file")
a = p.parse_args()

work = []
for w in a.workload:
    f, b, n = w.rsplit(":", 2)
    prompts = [l.strip() for l in Path(f).read_text(encoding="utf-8").splitlines() if l.strip()]
    work.append((w, (prompts * -(-int(b) // len(prompts)))[:int(b)], int(n)))
max_batch = max(len(x[1]) for x in work)
t0 = time.perf_counter()
llm = random_llm(a.random_weights, a.device, a.dtype, a.tokenizer, max_num_seqs=max_batch, kv_cache_memory=a.kv_cache_memory,
                 kv_cache_dtype=a.kv_cache_dtype, quantization=a.quantization, group_size=a.group_size,
                 runner="cuda" if a.runner != "none" and a.device.startswith("cuda") else None, enforce_eager=a.runner == "eager")
build_s = time.perf_counter() - t0
t0 = time.perf_counter()
eng = llm.get_engine()                                      # the engine and its runner (the CUDA runner captures its graphs here)
capture_s = time.perf_counter() - t0
if a.runner != "none" and not a.device.startswith("cuda"):     # off a GPU: the CUDA runner's wiring on torch ops (a test of it, not a speed)
    from xllm.cuda_runner import CudaRunner, TorchOps
    eng.runner = CudaRunner(llm.model, eng.pool, max_batch=max_batch, max_model_len=eng.max_model_len, enforce_eager=True, ops=TorchOps)
runner = eng.runner if eng.runner.name == "cuda" else None
if runner is not None and a.kernel_chunk_tokens is not None: runner.kernel_chunk_tokens = a.kernel_chunk_tokens
weight_bytes = sum(t.numel() * t.element_size() for t in {id(t): t for t in llm.model.state_dict().values()}.values())
for name, prompts, n in work:
    before = None if runner is None else (runner.num_graph_steps, runner.num_eager_steps, runner.num_ragged_steps)
    r = run_bench(llm, prompts, n, ignore_eos=True, progress=False)
    r.update(workload=name, config=a.random_weights, device=a.device, dtype=a.dtype, kv_cache_dtype=a.kv_cache_dtype or a.dtype, quantization=a.quantization, runner=a.runner, runner_repr=repr(eng.runner), runner_reason=eng.runner_reason, build_s=build_s,
             capture_s=capture_s, weight_bytes=weight_bytes, kv_cache_report=eng.kv_cache_report)
    if runner is not None:
        r["runner_steps"] = dict(zip(("graph", "eager", "ragged"), (x - y for x, y in zip((runner.num_graph_steps, runner.num_eager_steps, runner.num_ragged_steps), before))))
    if a.device.startswith("cuda"): r["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    line = json.dumps(r)
    print(line, flush=True)
    if a.json:
        with open(a.json, "a") as f: f.write(line + "\n")
