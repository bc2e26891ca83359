#!/usr/bin/env python
"""Host-side cost of the engine's steps with the model taken out: an `Engine` whose runner returns ready-made logits, so each
step is only scheduling, block management, batch building, sampling the (tiny-vocabulary) logits, stop checks and outputs.
On a GPU this Python work sits between the graph replays: at the issue's targets (15,000 tok/s at batch 200, 8,000 at 160)
a whole step has 13-20 ms, so this must stay a small part of it. Prints ms per step (best of `--reps`) per workload.

    python scripts/bench_engine_host.py [--batch 200 --prompt 8 --tokens 18] [--temperature 0] [--profile FILE]
"""
import argparse, time, cProfile, pstats
import torch
from xllm.core import LlamaConfig
from xllm.engine import Engine
from xllm.model import Llama
from xllm.sampling import SamplingParams

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--batch", type=int, default=200)
p.add_argument("--prompt", type=int, default=8, help="prompt tokens per request")
p.add_argument("--tokens", type=int, default=18, help="output tokens per request (EOS ignored)")
p.add_argument("--temperature", type=float, default=0.0)
p.add_argument("--vocab", type=int, default=512, help="logits width: small, so that sampling compute does not hide the Python")
p.add_argument("--reps", type=int, default=3)
p.add_argument("--profile", default=None, help="write a cProfile of one run here and print its top functions")
a = p.parse_args()
torch.set_num_threads(1)
c = LlamaConfig(vocab_size=a.vocab, hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                max_position_embeddings=4096)
model = Llama(c).eval()
logits = torch.randn(a.batch * a.prompt, a.vocab)
params = SamplingParams(temperature=a.temperature, max_tokens=a.tokens, ignore_eos=True, seed=0 if a.temperature else None)
prompts = [[(7 * i + j) % a.vocab for j in range(a.prompt)] for i in range(a.batch)]

def run():
    eng = Engine(model, max_num_seqs=a.batch, max_num_batched_tokens=max(512, a.batch * a.prompt), block_size=16,
                 num_blocks=a.batch * -(-(a.prompt + a.tokens) // 16) + 8)
    eng.runner = lambda b: logits[:b.logits_rows.shape[0]]
    for pr in prompts: eng.add_request(pr, params)
    t, steps = time.perf_counter(), 0
    while eng.has_unfinished(): eng.step(); steps += 1
    return (time.perf_counter() - t) / steps * 1e3, steps

if a.profile:
    cProfile.run("run()", a.profile)
    pstats.Stats(a.profile).sort_stats("tottime").print_stats(25)
best = min(run() for _ in range(a.reps))
print(f"batch {a.batch}, prompt {a.prompt}, {a.tokens} tokens, temperature {a.temperature}: {best[0]:.2f} ms per step over {best[1]} steps "
      f"(best of {a.reps}); {a.batch * a.tokens / (best[0] * best[1] / 1e3):.0f} tok/s if the model took no time")
