"""Prefill and decode speed of xllm's CPU forward pass against Hugging Face transformers, in the same run.

    python scripts/bench_generate.py [--model PATH] [--threads 2] [--prompt-len 128] [--new-tokens 64]

Both engines run the same float32 weights (the default model is dequantized from its Q4_1 GGUF; transformers
loads the same GGUF through its own converter). Prefill: one forward over the prompt. Decode: greedy, one token
per step through the KV cache. Reports tokens/s and the ratio xllm / transformers.
"""
import argparse, time, statistics
import torch

def timeit(fn, repeat):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-transformers", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from xllm.core import default_model_path
    from xllm.weights import load_checkpoint
    from xllm.model import Llama
    path = a.model or str(default_model_path())
    ck = load_checkpoint(path)
    model = Llama.from_weights(ck.config, ck.weights)
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, ck.config.vocab_size, (a.prompt_len,), generator=g)
    rows = []

    @torch.inference_mode()
    def xllm_prefill():
        model(prompt, model.new_cache(a.prompt_len + a.new_tokens))

    @torch.inference_mode()
    def xllm_decode():
        cache = model.new_cache(a.prompt_len + a.new_tokens)
        tok = model(prompt, cache)[-1].argmax().view(1)
        t = time.perf_counter()
        for _ in range(a.new_tokens):
            tok = model(tok, cache)[-1].argmax().view(1)
        return time.perf_counter() - t

    xllm_prefill()  # warm up
    rows.append(("xllm", a.prompt_len / timeit(xllm_prefill, a.repeat),
                 a.new_tokens / statistics.median(xllm_decode() for _ in range(a.repeat))))

    if not a.no_transformers:
        from pathlib import Path
        from transformers import AutoModelForCausalLM, DynamicCache
        p = Path(path)
        if p.suffix == ".gguf":
            hf = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=torch.float32)
        else:
            hf = AutoModelForCausalLM.from_pretrained(str(p), dtype=torch.float32)
        hf.eval()
        ids = prompt.view(1, -1)

        @torch.inference_mode()
        def hf_prefill():
            hf(ids, use_cache=True, past_key_values=DynamicCache())

        @torch.inference_mode()
        def hf_decode():
            cache = DynamicCache()
            out = hf(ids, use_cache=True, past_key_values=cache)
            tok = out.logits[0, -1].argmax().view(1, 1)
            t = time.perf_counter()
            for _ in range(a.new_tokens):
                out = hf(tok, use_cache=True, past_key_values=cache)
                tok = out.logits[0, -1].argmax().view(1, 1)
            return time.perf_counter() - t

        hf_prefill()
        rows.append(("transformers", a.prompt_len / timeit(hf_prefill, a.repeat),
                     a.new_tokens / statistics.median(hf_decode() for _ in range(a.repeat))))

    print(f"model: {path}  threads: {a.threads}  prompt: {a.prompt_len} tokens  decode: {a.new_tokens} tokens  (float32, median of {a.repeat})")
    print(f"{'engine':<14}{'prefill tok/s':>15}{'decode tok/s':>15}")
    for name, pf, dc in rows: print(f"{name:<14}{pf:>15.1f}{dc:>15.1f}")
    if len(rows) == 2:
        print(f"{'ratio':<14}{rows[0][1]/rows[1][1]:>15.2f}{rows[0][2]/rows[1][2]:>15.2f}   (xllm / transformers)")

if __name__ == "__main__":
    main()
