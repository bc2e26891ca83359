#!/usr/bin/env python
"""gpu_check.sh's summary table, from the records and logs its sections left in DIR (a part that is missing prints as n/a):
each workload's output tokens/s with the CUDA runner beside the seed's figure and hardware, issue 9's target, the roofline
(weights and K/V bytes over the measured copy bandwidth, or the FLOPs over the measured matmul rate, whichever is longer)
and the fraction of it reached, transformers generate on the same weights in the same run, the other runners; then the
pass/fail of every correctness section, and each section's outcome.
    python scripts/gpu_table.py DIR"""
import json, re, sys
from pathlib import Path

d = Path(sys.argv[1])
def lines(name):
    "The JSON records of a .jsonl file or of the JSON lines of a log (others skipped)."
    p = d / name
    if not p.exists(): return []
    out = []
    for l in p.read_text(errors="replace").splitlines():
        if l.startswith("{"):
            try: out.append(json.loads(l))
            except json.JSONDecodeError: pass
    return out
by = lambda rows: {r.get("workload"): r for r in rows}
graphs, eager, hf, i8, q4 = (by(lines(f)) for f in ("xllm_graphs.jsonl", "xllm_engine.jsonl", "hf.jsonl", "xllm_int8kv.jsonl", "xllm_int4.jsonl"))
roof = (lines("roofline.json") or [{}])[0]
f = lambda v, fmt=",.0f": "n/a" if v is None else format(v, fmt)
dry = (d / "dry_run.txt").exists()

# the seed's published figures (llama2-7B FP16) and issue 9's targets on one H200, by (file, batch, new tokens)
SEED = {("hello.txt", 200, 18): (5330, "RTX 4090"), ("prompts.txt", 48, 512): (962, "RTX 4090"), ("prompts.txt", 160, 512): (2200, "A100")}
TARGET = {("hello.txt", 200, 18): 15000, ("prompts.txt", 160, 512): 8000}
def key(w):
    f_, b, n = w.rsplit(":", 2)
    return Path(f_).name, int(b), int(n)
label = lambda w: "{} batch {} x {}".format(*key(w))

def roofline(r):
    """(output tokens/s at the roofline, 'memory' or 'compute') of record `r` with every request in flight at once: weights read
    once for the prefill and once per decode step, each decode step reading every sequence's K/V so far; FLOPs 2 per
    parameter per token (the lm_head only for the tokens sampled) plus decode attention (4 x layers x heads x head size per
    token of context). Prefill attention and activations are left out: a floor, never above what the hardware could do."""
    need = ("copy_bandwidth_gbs", "matmul_tflops", "weight_bytes_per_step", "kv_bytes_per_token", "matmul_params", "lm_head_params")
    if not r or any(roof.get(k) is None for k in need) or not r.get("output_tokens"): return None, None
    R, P, n, out = r["requests"], r["prompt_tokens"], r["max_tokens"], r["output_tokens"]
    ctx = (n - 1) * P + R * (n - 1) * n // 2                      # K/V tokens read over the decode steps
    rows = P + R * (n - 1)                                        # tokens through the layers
    nbytes = roof["weight_bytes_per_step"] * n + roof["kv_bytes_per_token"] * (ctx + rows)
    flops = (2 * (roof["matmul_params"] - roof["lm_head_params"]) * rows + 2 * roof["lm_head_params"] * R * n
             + 4 * roof["num_layers"] * roof["num_heads"] * roof["head_dim"] * ctx)
    t_mem, t_cmp = nbytes / (roof["copy_bandwidth_gbs"] * 1e9), flops / (roof["matmul_tflops"] * 1e12)
    return out / max(t_mem, t_cmp), "memory" if t_mem >= t_cmp else "compute"

keys = list(dict.fromkeys([*graphs, *eager, *i8, *hf]))
cfg = next((r.get("config") for r in [*graphs.values(), *eager.values(), *hf.values()] if r.get("config")), roof.get("config", "?"))
dtype = next((r["dtype"] for r in [*graphs.values(), *eager.values()] if "dtype" in r), "?")
if dry: print("\n**** DRY RUN on the CPU (GPU_CHECK_DRY_RUN=1): a tiny model, float32, tiny workloads, TorchOps and the CUDA emulator; "
              "the plumbing is real, no figure below means anything about a GPU ****")
print(f"\n==== xllm GPU check: {roof.get('gpu', 'GPU ?')}, {Path(str(cfg)).name} shape, random {dtype} weights ====")
pc = next((r.get("prefix_caching") for r in graphs.values()), None)
print(f"output tokens/s = output tokens / wall time, prefill included; EOS ignored; after a warm-up run; prompts byte-tokenized (about 4x "
      f"the tokens of Llama's tokenizer); prefix caching {'on' if pc else 'off' if pc is not None else 'n/a'} (160 requests repeat 20 prompts)")
if roof.get("copy_bandwidth_gbs"):
    print(f"roofline: copy bandwidth {f(roof['copy_bandwidth_gbs'])} GB/s and {roof.get('matmul_dtype', '?')} matmul {f(roof.get('matmul_tflops'), ',.1f')} TFLOP/s "
          f"measured in this run; {f(roof['weight_bytes_per_step'] / 1e9, '.2f')} GB of weights per step, {f(roof['kv_bytes_per_token'] / 2**10, ',.0f')} KiB of K/V per token")
runner = next((r["runner"] for r in graphs.values() if r.get("runner")), "cuda")      # a dry run: the CPU's own runner
hdr = ("workload", f"{runner} runner", "seed (hardware)", "target", "roofline (bound)", "of roof", "transformers", "runner/HF", "torch runner", "int8 K/V")
fmt = "{:28s} {:>11s} {:>17s} {:>7s} {:>19s} {:>7s} {:>12s} {:>9s} {:>12s} {:>9s}"
print(fmt.format(*hdr))
for k in keys:
    g, e, q, h = (x.get(k, {}).get("output_tok_s") for x in (graphs, eager, i8, hf))
    rt, bound = roofline(graphs.get(k) or eager.get(k))
    seed = SEED.get(key(k))
    print(fmt.format(label(k), f(g), f"{seed[0]:,} ({seed[1]})" if seed else "-", f(TARGET.get(key(k))),
                     f"{f(rt)} ({bound})" if rt else "n/a", f"{g / rt:.0%}" if g and rt else "n/a", f(h),
                     f"{g / h:.2f}x" if g and h else "n/a", f(e), f(q)))
if any(key(k) in SEED for k in keys):
    print("seed: the seed's published llama2-7B FP16 figures on the hardware named (not this GPU); target: issue 9's, on one H200")
b1 = next((k for k in keys if key(k)[1] == 1), None)
b1g, b1e = (x.get(b1, {}).get("decode_tok_s") for x in (graphs, eager))
if b1 and roof.get("copy_bandwidth_gbs"):
    L = key(b1)[2] + (graphs.get(b1) or {}).get("prompt_tokens", 0)
    rb = roof["copy_bandwidth_gbs"] * 1e9 / (roof["weight_bytes_per_step"] + roof["kv_bytes_per_token"] * L)
    print(f"batch-1 decode tokens/s: {runner} runner {f(b1g, '.1f')}, torch runner {f(b1e, '.1f')} (issue 9's target >= 230); roofline {f(rb, '.1f')} "
          f"(weights + K/V at context {L}){f'; {b1g / rb:.0%} of it' if b1g else ''}")
if q4:
    print("int4 weights (groups of 32), cuda runner: " + "; ".join(
        f"{label(k)}: {f(r.get('output_tok_s'))} tok/s" + (f", decode {f(r.get('decode_tok_s'), '.1f')} tok/s" if key(k)[1] == 1 else "")
        for k, r in q4.items()) + f" (weights {next(iter(q4.values())).get('weight_bytes', 0) / 1e9:.2f} GB)")
try: cli = json.loads((d / "cli.json").read_text())               # xllm bench --json writes one indented object
except (OSError, json.JSONDecodeError): cli = None
if cli: print(f"xllm bench --random-weights (the CLI, {cli.get('runner')} runner, {cli.get('requests')} requests x {cli.get('max_tokens')}): {f(cli.get('output_tok_s'))} output tok/s")
for r in lines("engine_host.jsonl"):
    print(f"engine host work per step ({r['workload']}): {r['step_ms']:.2f} ms over {r['steps']} steps ({r['model_free_tok_s']:,.0f} tok/s if the model "
          f"took no time); PagedBatch.build {r['build_ms']:.2f} ms, CUDA runner _load {r['load_ms']:.2f} ms")

k = lines("kernels.jsonl")
if k: print("kernels vs torch (speedup = torch / xllm): " + "; ".join(f"{r['kernel']} {r['speedup']:.2f}x" for r in k))
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

status = dict(l.split(": ", 1) for l in (d / "status.txt").read_text().splitlines() if ": " in l) if (d / "status.txt").exists() else {}
print("\ncorrectness (pass/fail):")
for name, what in (("env", "imports, wheels, one kernel"), ("correctness", "cuda vs cpu"), ("tensor_parallel", "TP vs one process"), ("pytest_gpu", "GPU tests"),
                   ("notebooks", "cuda cells")):
    cases = [r for r in lines(f"{name}.log") if "case" in r and ("pass" in r or "skipped" in r)]   # timings carry neither
    failed = [r["case"] for r in cases if r.get("pass") is False]
    detail = (f"; {sum(r.get('pass') is True for r in cases)} of {len(cases)} cases pass" + (f", {sum('skipped' in r for r in cases)} skipped" if any('skipped' in r for r in cases) else "")
              + (f"; FAILED: {'; '.join(failed)}" if failed else "")) if cases else ""
    if name == "pytest_gpu" and (d / "pytest_gpu.log").exists():
        tail = [l for l in (d / "pytest_gpu.log").read_text(errors="replace").splitlines() if re.search(r"\d+ (passed|failed|skipped|error|tests? collected)", l)]
        detail = f"; {tail[-1].strip('= ')}" if tail else ""
    if name == "env" and (d / "env.log").exists():
        detail = "; " + "; ".join(l.strip() for l in (d / "env.log").read_text(errors="replace").splitlines() if l.startswith(("NVRTC build", "one kernel on", "MISSING", "cupy ")))
    print(f"  {name:16s} {what:26s} {status.get(name, 'not run')}{detail}")
for n, s in status.items():                                          # why each failed section failed: its log's last line
    log = d / f"{n}.log"
    if s.startswith(("FAILED", "TIMEOUT")) and log.exists():
        last = [l for l in log.read_text(errors="replace").splitlines() if l.strip()][-1:] or ["(empty log)"]
        print(f"  {n} {s.split(',')[0]}: {last[0][:300]}")
print("sections: " + "; ".join(f"{n}: {s}" for n, s in status.items()))
