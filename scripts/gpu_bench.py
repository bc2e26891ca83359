#!/usr/bin/env python
"""Throughput of a random-weight model over several workloads on one engine, for gpu_check.sh's speed sections: what
`xllm bench --random-weights` measures (`xllm.bench.throughput`, records of its schema), plus
- a warm-up first: one untimed run at the largest batch (4 new tokens), so module loads, CUDA graph capture, cuBLAS's first
  calls and the allocator's growth stay out of the timed rows;
- prefix caching off by default: the 160-request workload repeats 20 prompts, and with the cache on most of its prefill
  would be skipped (`--prefix-caching` turns it on; the record says which);
- each workload's record appended to --json as soon as it is measured (a timeout keeps the rows already done).

    python scripts/gpu_bench.py --random-weights llama2-7b --device cuda --runner cuda --json out.jsonl \\
        --workload bench/hello.txt:200:18 --workload bench/prompts.txt:160:512
"""
import argparse, json, time
from xllm.bench import throughput, workload, save_results
from xllm.llm import random_llm

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--random-weights", required=True, metavar="CONFIG", help="a shape name (llama2-7b, ...) or a config.json")
p.add_argument("--workload", action="append", required=True, metavar="FILE:BATCH:MAX_TOKENS")
p.add_argument("--device", default="cuda")
p.add_argument("--dtype", default="float16")
p.add_argument("--runner", default=None, help="cuda, torch or cpu (default: the device's own)")
p.add_argument("--kv-cache-dtype", default=None, choices=["int8"])
p.add_argument("--quantization", default=None, choices=["int8", "int4"])
p.add_argument("--max-num-seqs", type=int, default=None, help="default: the largest batch of the workloads")
p.add_argument("--prefix-caching", action="store_true", help="keep the engine's prefix cache on (default off)")
p.add_argument("--json", required=True, help="append one record per workload to this .jsonl file")
a = p.parse_args()
if not a.json.endswith(".jsonl"): p.error("--json must name a .jsonl file (records are appended one by one)")

specs = [workload(w) for w in a.workload]                      # (label, prompts, max_tokens): the files are read before the load
maxb = a.max_num_seqs or max(len(pr) for _, pr, _ in specs)
t = time.perf_counter()
llm = random_llm(a.random_weights, device=a.device, dtype=a.dtype, kv_cache_dtype=a.kv_cache_dtype, quantization=a.quantization, runner=a.runner,
                 max_num_seqs=maxb, enable_prefix_caching=a.prefix_caching)
print(f"loaded random {a.random_weights} ({a.dtype}{', ' + a.quantization if a.quantization else ''}) on {a.device} in {time.perf_counter() - t:.1f} s; "
      f"max_num_seqs {maxb}, prefix caching {'on' if a.prefix_caching else 'off'}", flush=True)
big = max(specs, key=lambda s: len(s[1]))
t = time.perf_counter()
throughput(llm, [f"{a.workload[specs.index(big)].rsplit(':', 2)[0]}:{len(big[1])}:4"], progress=False, ignore_eos=True)   # warm-up, not recorded
print(f"warm-up ({len(big[1])} requests x 4 tokens): {time.perf_counter() - t:.1f} s", flush=True)
for w in a.workload:
    (r,) = throughput(llm, [w], progress=False, ignore_eos=True)
    r.update(prefix_caching=a.prefix_caching, config=a.random_weights, warmed_up=True)
    save_results([r], a.json)
    print(json.dumps({k: r[k] for k in ("workload", "runner", "output_tok_s", "decode_tok_s", "prefill_tok_s", "wall_s") if k in r}), flush=True)
