#!/usr/bin/env python
"""Measure quantized linears and decode speed (not a test): matrix-vector time of each linear type on SmolLM2-135M shapes,
and decode tokens/s + memory of the default model as float32, INT8 (quantize_model) and INT4 (GGUF Q4_1 repacked).

    python scripts/bench_quant.py [--threads 2] [--tokens 32] [--skip-decode]

Wall-clock and process CPU time are both reported (the machine may be shared: CPU time / wall time shows how much of
the threads we actually got)."""
import argparse, time
import torch, torch.nn as nn

from xllm.quant import Int8Linear, Int4Linear, quantize_model, load_quantized_gguf, model_bytes, perplexity, KERNELS


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
        row = {"shape": label, "f32": timeit(lambda: lin(x), it)}
        for name, mod in [("int8", Int8Linear.from_float(lin)), ("int4 g32", Int4Linear.from_float(lin, 32))]:
            for k in KERNELS:
                mod.set_kernel(k)
                row[f"{name} {k}"] = timeit(lambda: mod(x), it)
        rows.append(row)
    return rows


@torch.inference_mode()
def decode_speed(model, n_tokens: int, prompt=(1, 504, 3458, 314, 253, 1345, 30, 378)) -> tuple[float, float]:
    "(tokens/s wall, tokens per CPU-second) of greedy one-token decode steps after a short prompt."
    cache = model.new_cache(len(prompt) + n_tokens + 8)
    logits = model(torch.tensor(prompt), cache, last_only=True)
    tok = torch.tensor([int(logits[-1].argmax())])
    for _ in range(4): tok = torch.tensor([int(model(tok, cache)[-1].argmax())])     # warm-up (kernel packing, allocator)
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n_tokens): tok = torch.tensor([int(model(tok, cache)[-1].argmax())])
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return n_tokens / wall, n_tokens / cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--skip-linears", action="store_true")
    ap.add_argument("--ppl-file", default=None, help="text for perplexity (default: the Apache-2.0 LICENSE shipped with transformers)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--skip-ppl", action="store_true")
    ap.add_argument("--only", default=None, help="run only the decode variants whose name contains this")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {a.threads} threads, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    if not a.skip_linears:
        print("\n## one token through one linear: wall µs (CPU µs)\n")
        rows = bench_linears()
        cols = [k for k in rows[0] if k != "shape"]
        print("| shape | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
        for r in rows: print(f"| {r['shape']} | " + " | ".join(f"{r[c][0]:.0f} ({r[c][1]:.0f})" for c in cols) + " |")
    if a.skip_decode: return
    from xllm.core import default_model_path
    from xllm.weights import load_checkpoint
    from xllm.model import Llama
    try: path = default_model_path(download=False)
    except FileNotFoundError: print("default model not in cache: decode benchmark skipped"); return
    ck = load_checkpoint(path)
    def f32(): return Llama.from_weights(ck.config, ck.weights)
    variants = [("float32 (dequantized GGUF)", f32),
                ("int8 per-channel, bf16 kernel", lambda: quantize_model(f32(), "int8")),
                ("int8 per-channel, dequant kernel (float32 activations)", lambda: quantize_model(f32(), "int8", kernel="dequant")),
                ("int8 per-channel + lm_head, bf16 kernel", lambda: quantize_model(f32(), "int8", lm_head=True)),
                ("int4 GGUF Q4_1 repack, bf16 kernel", lambda: load_quantized_gguf(path)),
                ("int4 GGUF Q4_1 repack, dequant kernel", lambda: load_quantized_gguf(path, kernel="dequant")),
                ("int4 g32 from float, bf16 kernel", lambda: quantize_model(f32(), "int4", 32))]
    ppl_ids = None
    if not a.skip_ppl:
        from xllm.tokenizer import Tokenizer
        text_path = a.ppl_file
        if text_path is None:
            import importlib.metadata as md
            text_path = next((f.locate() for f in md.distribution("transformers").files if f.name == "LICENSE"), None)
        if text_path is not None:
            ppl_ids = Tokenizer.from_file(path).encode(open(text_path, encoding="utf-8").read())
            print(f"\nperplexity text: {text_path} ({len(ppl_ids)} tokens, ctx {a.ctx}, {len(ppl_ids) // a.ctx} windows)")
    print(f"\n## decode, default model ({path.name}), {a.tokens} tokens, batch 1\n")
    print("| model | tok/s (wall) | tok per CPU-s | memory MiB | perplexity |\n|---|---|---|---|---|")
    for name, make in variants:
        if a.only and a.only not in name: continue
        m = make()
        tps, tpc = decode_speed(m, a.tokens)
        ppl = perplexity(m, ppl_ids, a.ctx, progress=False) if ppl_ids is not None else float("nan")
        print(f"| {name} | {tps:.1f} | {tpc:.1f} | {model_bytes(m) / 2**20:.0f} | {ppl:.3f} |", flush=True)
        del m


if __name__ == "__main__":
    main()
