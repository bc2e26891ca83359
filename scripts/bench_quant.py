#!/usr/bin/env python
"""Time one token (or --rows) through each quantized linear type and kernel on SmolLM2-135M's shapes (not a test): float32
`F.linear`, `Int8Linear` and `Int4Linear` (groups of 32) with each of `xllm.quant.KERNELS`, the torch path's choice of kernel.
Whole-model speed is `xllm bench decode` / `prefill` (notebook 20) and scripts/bench_vs_llamacpp.py.

    python scripts/bench_quant.py [--threads 2] [--rows 1] [--json OUT.jsonl]

Wall-clock and process CPU time are both reported (the machine may be shared: CPU time / wall time shows how much of
the threads we actually got); --json appends one record of xllm.bench's schema per shape (name "linear-kernels")."""
import argparse, time
import torch, torch.nn as nn

from xllm.bench import environment, save_results
from xllm.quant import Int8Linear, Int4Linear, KERNELS


def timeit(f, iters: int, warmup: int = 3):
    "Mean (wall µs, CPU µs) per call."
    for _ in range(warmup): f()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(iters): f()
    return (time.perf_counter() - t) / iters * 1e6, (time.process_time() - c) / iters * 1e6


SHAPES = {"q/o_proj 576x576": (576, 576), "k/v_proj 192x576": (192, 576), "gate/up 1536x576": (1536, 576),
          "down 576x1536": (576, 1536), "lm_head 49152x576": (49152, 576)}


@torch.inference_mode()
def bench_linears(n_tok: int = 1, iters: int = 50) -> list[dict]:
    rows = []
    for label, (n_out, n_in) in SHAPES.items():
        torch.manual_seed(0)
        lin = nn.Linear(n_in, n_out, bias=False).requires_grad_(False)
        x = torch.randn(n_tok, n_in)
        it = max(3, iters // 20) if n_out > 10000 else iters
        row = {"shape": label, "env": environment(), "f32": timeit(lambda: lin(x), it)}
        for name, mod in [("int8", Int8Linear.from_float(lin)), ("int4 g32", Int4Linear.from_float(lin, 32))]:
            for k in KERNELS:
                mod.set_kernel(k)
                row[f"{name} {k}"] = timeit(lambda: mod(x), it)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1, help="rows of x (tokens) per call")
    ap.add_argument("--json", default=None, help="append the records to this JSON Lines file")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {a.threads} threads, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print(f"\n## {a.rows} row(s) of x through one linear: wall µs (CPU µs)\n")
    rows = bench_linears(a.rows)
    cols = [k for k in rows[0] if k not in ("shape", "env")]
    print("| shape | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for r in rows: print(f"| {r['shape']} | " + " | ".join(f"{r[c][0]:.0f} ({r[c][1]:.0f})" for c in cols) + " |")
    if a.json:
        save_results([{"name": "linear-kernels", "workload": f"{r['shape']}, {a.rows} row(s)", "runner": "torch (one layer)", **r["env"],
                       **{f"{c} wall_us": r[c][0] for c in cols}, **{f"{c} cpu_us": r[c][1] for c in cols}} for r in rows], a.json)


if __name__ == "__main__":
    main()
