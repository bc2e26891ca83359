#!/usr/bin/env python
"""Decode speed of the default model at batch 1 through `Llama.forward`: the torch path (`xllm.cpu_kernels.disabled()`) against
the compiled decode step (notebook 12a), for float32 (dequantized GGUF), INT8 (quantize_model) and INT4 (the GGUF's Q4_1 repacked).

    OMP_WAIT_POLICY=PASSIVE python scripts/bench_cpu_kernels.py [--threads 2] [--tokens 64] [--repeat 3] [--forms int4,int8,float32] [--a8]

Reports the median tokens/s (wall) over `--repeat` runs and the CPU seconds per token (process time: on a shared machine it shows
the work done, whatever share of the cores we got)."""
import argparse, json, statistics, time
import torch


def decode(m, n, prompt):
    "(tokens/s wall, CPU ms per token) of n greedy one-token steps after prompt."
    with torch.inference_mode():
        cache = m.new_cache(len(prompt) + n + 8)
        tok = m(prompt, cache, last_only=True)[-1].argmax().view(1)
        for _ in range(4): tok = m(tok, cache)[-1].argmax().view(1)       # warm-up (plan build, packing)
        t, c = time.perf_counter(), time.process_time()
        for _ in range(n): tok = m(tok, cache)[-1].argmax().view(1)
        return n / (time.perf_counter() - t), (time.process_time() - c) / n * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--forms", default="int4,int8,float32")
    ap.add_argument("--a8", action="store_true", help="int8 activations in the compiled step")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from xllm.core import default_model_path
    from xllm.weights import load_checkpoint
    from xllm.model import Llama
    from xllm.quant import quantize_model, load_quantized_gguf
    from xllm import cpu_kernels as ck
    ck.DEFAULT_A8 = a.a8
    print(f"kernels: {ck.status()}, {a.threads} threads, a8={a.a8}")
    path = default_model_path(download=False)
    prompt = torch.tensor([1, 9690, 198, 2683, 359, 253, 5356])
    rows = {}
    for form in a.forms.split(","):
        if form == "int4": m = load_quantized_gguf(path)
        else:
            c = load_checkpoint(path); m = Llama.from_weights(c.config, c.weights)
            if form == "int8": m = quantize_model(m, "int8")
        res = {}
        for name in ("torch", "compiled"):
            runs = []
            for _ in range(a.repeat):
                if name == "torch":
                    with ck.disabled(): runs.append(decode(m, a.tokens, prompt))
                else: runs.append(decode(m, a.tokens, prompt))
            res[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        rows[form] = res
        print(f"{form:8s} torch path {res['torch'][0]:6.1f} tok/s ({res['torch'][1]:5.1f} CPU ms/token)   "
              f"compiled step {res['compiled'][0]:6.1f} tok/s ({res['compiled'][1]:5.1f} CPU ms/token)   x{res['compiled'][0] / res['torch'][0]:.1f}", flush=True)
        del m
    if a.json:
        with open(a.json, "w") as f: json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
