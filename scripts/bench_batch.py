#!/usr/bin/env python
"""Continuous batching vs one request at a time, on the default model (SmolLM2-135M-Instruct Q4_1, dequantized to float32).

    python scripts/bench_batch.py [--n 32] [--max-num-seqs 32] [--threads 2]

N greedy requests (prompts of 32-128 tokens cut from a fixed text, 64-128 new tokens, EOS ignored so every run does the
same work) go (1) through `xllm.engine.Engine` together and (2) one at a time through the contiguous-cache path
(`Llama.forward` with a `KVCache`: prefill, then one token per call). Prints the KV-cache start-up line, total tokens/s
(prompt + generated) and generated tokens/s for both, peak KV blocks, and whether the outputs agree token for token.
Not a test: timings depend on the machine and on whatever else runs on it.
"""
import argparse, os, random, time

# On a machine shared with other jobs, OpenMP threads that spin while waiting for a descheduled sibling waste most of the CPU;
# passive waiting keeps 2-thread timings sane under load (set OMP_WAIT_POLICY yourself to override).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch

from xllm.core import default_model_path
from xllm.weights import load_checkpoint
from xllm.tokenizer import Tokenizer
from xllm.model import Llama
from xllm.sampling import SamplingParams
from xllm.engine import Engine

TEXT = """The history of computing is a story of ideas that became machines. Early mechanical calculators could add and multiply,
but they could not be programmed. Charles Babbage designed the Analytical Engine, a general-purpose machine with a store and a mill,
and Ada Lovelace wrote what many consider the first program for it. A century later, Alan Turing described a simple abstract machine
that could compute anything computable, and during the Second World War electronic machines were built to break codes and compute
artillery tables. The stored-program computer, in which instructions live in the same memory as data, made software possible.
Transistors replaced vacuum tubes, integrated circuits put thousands and then billions of transistors on a chip, and personal computers
brought computing into homes and offices. Networks connected these machines, and the World Wide Web turned the internet into a place
where anyone could publish. Today, large language models run on clusters of accelerators and answer questions in plain language,
and people ask them to write letters, explain mathematics, translate poems and summarise long reports."""


def sequential(model, prompts, params, ctx):
    "Each request alone through the contiguous KV cache; returns the generated ids."
    outs = []
    for p, sp in zip(prompts, params):
        cache = model.new_cache(min(ctx, len(p) + sp.max_tokens))
        logits, out = model(torch.tensor(p), cache, last_only=True)[-1], []
        while True:
            t = int(logits.argmax()); out.append(t)
            if len(out) >= sp.max_tokens: break
            logits = model(torch.tensor([t]), cache)[-1]
        outs.append(out)
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=32, help="number of requests")
    ap.add_argument("--max-num-seqs", type=int, default=32)
    ap.add_argument("--max-num-batched-tokens", type=int, default=512)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--kv-cache-memory", type=int, default=256 * 2**20, help="bytes")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-sequential", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    path = default_model_path()
    ck = load_checkpoint(path)
    model = Llama.from_weights(ck.config, ck.weights)
    tok = Tokenizer.from_file(ck.tokenizer_path, vocab_size=ck.config.vocab_size)
    text_ids = tok.encode(" ".join([TEXT] * 3))
    rng = random.Random(a.seed)
    prompts, params = [], []
    for _ in range(a.n):
        n = rng.randint(32, 128); s = rng.randrange(0, len(text_ids) - n)
        prompts.append(text_ids[s:s + n])
        params.append(SamplingParams(temperature=0, max_tokens=rng.randint(64, 128), ignore_eos=True))
    n_prompt, n_gen = sum(map(len, prompts)), sum(p.max_tokens for p in params)
    print(f"model {path.name}, float32, {a.threads} threads (OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}); {a.n} requests: {n_prompt} prompt tokens, {n_gen} new tokens (greedy, EOS ignored)", flush=True)

    def run_engine():
        eng = Engine(model, tok, max_num_seqs=a.max_num_seqs, max_num_batched_tokens=a.max_num_batched_tokens,
                     block_size=a.block_size, kv_cache_memory=a.kv_cache_memory)
        t0 = time.perf_counter()
        res = eng.generate(list(zip(prompts, params)))
        dt = time.perf_counter() - t0
        assert all(len(r.token_ids) == sp.max_tokens for r, sp in zip(res, params)), "engine: wrong output lengths"
        print(f"engine (max_num_seqs={a.max_num_seqs}, max_num_batched_tokens={a.max_num_batched_tokens}): {dt:.1f} s, "
              f"{(n_prompt + n_gen) / dt:.1f} total tokens/s, {n_gen / dt:.1f} generated tokens/s; {eng.num_steps} steps, "
              f"peak {eng.block_manager.peak_used_blocks}/{eng.block_manager.num_blocks} blocks, {eng.scheduler.num_preemptions} preemptions; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        return res, dt

    print(Engine(model, tok, block_size=a.block_size, kv_cache_memory=a.kv_cache_memory).kv_cache_report, flush=True)
    res, dt_e = run_engine()
    if a.skip_sequential: return
    t0 = time.perf_counter()
    seq = sequential(model, prompts, params, ck.config.max_position_embeddings)
    dt_s = time.perf_counter() - t0
    print(f"one at a time (contiguous KVCache): {dt_s:.1f} s, {(n_prompt + n_gen) / dt_s:.1f} total tokens/s, "
          f"{n_gen / dt_s:.1f} generated tokens/s; load average {os.getloadavg()[0]:.1f}", flush=True)
    _, dt_e2 = run_engine()                 # again after the slow phase, so both runs bracket the machine's load
    same = sum(r.token_ids == s for r, s in zip(res, seq))
    first_diff = [next((i for i, (x, y) in enumerate(zip(r.token_ids, s)) if x != y), None) for r, s in zip(res, seq)]
    print(f"speed-up {dt_s / dt_e:.2f}x / {dt_s / dt_e2:.2f}x (engine run before / after); identical greedy outputs: {same}/{a.n}"
          + ("" if same == a.n else f" (first differing positions: {[d for d in first_diff if d is not None]})"))


if __name__ == "__main__":
    main()
