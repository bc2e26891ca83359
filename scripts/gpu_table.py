#!/usr/bin/env python
"""Print gpu_check.sh's one summary table from the result records (xllm.bench's schema) its sections left in DIR (missing parts print as n/a)."""
import json, sys
from pathlib import Path

d = Path(sys.argv[1])
def lines(name):
    p = d / name
    if not p.exists(): return []
    out = []
    for l in p.read_text().splitlines():
        try: out.append(json.loads(l))
        except json.JSONDecodeError: pass
    return out
by = lambda rows: {r.get("workload"): r for r in rows}
graphs, eager, hf = by(lines("xllm_graphs.jsonl")), by(lines("xllm_engine.jsonl")), by(lines("hf.jsonl"))
i8 = by(lines("xllm_int8kv.jsonl"))
try: cli = [json.loads((d / "cli.json").read_text())]               # xllm bench --json writes one indented object
except (OSError, json.JSONDecodeError): cli = []
roof = (lines("roofline.json") or [{}])[0]
f = lambda v, fmt=".0f": "n/a" if v is None else format(v, fmt)
TARGETS = {"bench/hello.txt:200:18": 15000, "bench/prompts.txt:160:512": 8000}      # issue 9's targets on one H200
keys = list(dict.fromkeys([*graphs, *eager, *i8, *hf]))
def label(k):
    f_, b, n = k.rsplit(":", 2)
    return f"{Path(f_).name} batch {b} x {n}"
W = [(k, label(k), TARGETS.get(k)) for k in keys]
b1 = next((k for k in keys if k.rsplit(":", 2)[1] == "1"), None)
cfg = next((r.get("config") or r.get("model", "?").removeprefix("random-") for r in [*graphs.values(), *eager.values(), *hf.values()]), "?")
dtype = next((r["dtype"] for r in [*graphs.values(), *eager.values()] if "dtype" in r), "float16")
print(f"\n==== xllm GPU check: {roof.get('gpu', 'GPU ?')}, {cfg} shape, random {dtype} weights (byte-tokenized prompts) ====")
print("output tokens/s (end to end, prefill included; EOS ignored):")
print(f"{'workload':30s} {'xllm engine':>12s} {'+cuda runner':>13s} {'+int8 K/V':>10s} {'transformers':>13s} {'runner/HF':>10s} {'target':>8s}")
for key, lab, target in W:
    g, e, q, h = (x.get(key, {}).get("output_tok_s") for x in (graphs, eager, i8, hf))
    print(f"{lab:30s} {f(e):>12s} {f(g):>13s} {f(q):>10s} {f(h):>13s} {(f(g / h, '.2f') + 'x') if g and h else 'n/a':>10s} {f(target):>8s}")
b1g, b1e = (x.get(b1, {}).get("decode_tok_s") for x in (graphs, eager))
rb = roof.get("roofline_batch1_tok_s")
print(f"batch-1 decode tokens/s: engine {f(b1e, '.1f')}, with cuda runner {f(b1g, '.1f')} (target >= 230); roofline {f(rb, '.1f')} "
      f"= {f(roof.get('copy_bandwidth_gbs'), '.0f')} GB/s copy bandwidth / {f((roof.get('weight_bytes_per_step') or 0) / 1e9 or None, '.2f')} GB weights per step"
      + (f"; runner at {b1g / rb:.0%} of roofline" if b1g and rb else ""))
q4 = by(lines("xllm_int4.jsonl"))
if q4:
    print("int4 weights (groups of 32, GEMV kernels up to 16 rows, dequantize + cuBLAS above), cuda runner: " + "; ".join(
        f"{label(k)}: {f(r.get('output_tok_s'))} output tok/s" + (f", decode {f(r.get('decode_tok_s'), '.1f')} tok/s" if k.rsplit(':', 2)[1] == '1' else "")
        for k, r in q4.items()) + f" (weights {next(iter(q4.values())).get('weight_bytes', 0) / 1e9:.2f} GB)")
if cli: print(f"xllm bench --random-weights {cfg} (CLI, engine, {cli[0].get('requests')} requests): {f(cli[0].get('output_tok_s'))} output tok/s")
host = lines("engine_host.jsonl")
if host:
    print("engine host work per step, model taken out (xllm bench host):")
    for r in host: print(f"  {r['workload']}: {r['step_ms']:.2f} ms per step over {r['steps']} steps ({r['model_free_tok_s']:.0f} tok/s if the model took no time); "
                         f"one decode step's PagedBatch.build {r['build_ms']:.2f} ms, CUDA runner _load {r['load_ms']:.2f} ms")
k = lines("kernels.jsonl")
if k:
    print("kernels vs torch (GPU time, speedup = torch / xllm): " + "; ".join(f"{r['kernel']} {r['speedup']:.2f}x" for r in k))

def crossover(fast, slow):
    "The largest size at which `fast` (size -> us) still beats `slow`, scanning sizes upward; None when it never does."
    best = None
    for n in sorted(set(fast) & set(slow)):
        if fast[n] < slow[n]: best = n
        else: break
    return best
num = lambda r: int(r["kernel"].rsplit("=", 1)[1])
for bits in ("int8", "int4"):                                          # where the GEMV kernel stops beating dequantize + cuBLAS
    gemv = {num(r): r["xllm_us"] for r in k if r["kernel"].startswith(f"{bits}_linear M=") and "[11008,4096]" in r["shape"]}
    deq = {num(r): r["xllm_us"] for r in k if r["kernel"].startswith(f"{bits} deq+mm M=")}
    if gemv and deq: print(f"suggested QUANT_GEMV_ROWS for {bits} (now 16): {crossover(gemv, deq)} (GEMV faster up to there, measured M = {sorted(deq)})")
for n_kv in ("32", "8"):                                              # where the tiles stop beating gather + SDPA
    rows = [r for r in k if r["kernel"].startswith("prefill attn T=") and r["shape"].startswith("tiles") and f"32/{n_kv} heads" in r["shape"]]
    tiles, sdpa = {num(r): r["xllm_us"] for r in rows}, {num(r): r["torch_us"] for r in rows}
    if tiles: print(f"suggested kernel_chunk_tokens for 32/{n_kv} heads (now 64): {crossover(tiles, sdpa)} (tiles faster than gather + SDPA up to there)")
if (d / "env.log").exists():
    print("; ".join(l.strip() for l in (d / "env.log").read_text().splitlines() if l.startswith(("NVRTC build", "torch ", "cupy "))))
st = (d / "status.txt").read_text().strip().splitlines() if (d / "status.txt").exists() else []
print("sections: " + ", ".join(st))
