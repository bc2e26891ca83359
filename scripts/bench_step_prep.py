#!/usr/bin/env python
"""Host-side work of one decode step on the CUDA runner's path, on the CPU (no GPU needed): `PagedBatch.build` for B decode
rows of L-token contexts, then `CudaRunner._load` (inputs and block tables into the runner's buffers), and for comparison
`build` plus the key-slot structures the torch / CPU paths ask for. Best of `--reps` rounds of 10 calls each, in ms.
On a GPU this work sits on every step's critical path (the graph replay waits for the copies).

    python scripts/bench_step_prep.py [--batch 160] [--context 640] [--reps 5]

A/B against an older commit: `git worktree add /tmp/old REV` and run this script with `PYTHONPATH=/tmp/old` (the script
itself from this checkout), interleaving the runs: this machine's speed drifts.
"""
import argparse, time
import torch
from xllm.core import LlamaConfig
from xllm.model import PagedBatch
from xllm.kv_pool import PagedKVPool
from xllm.model import Llama
from xllm.cuda_runner import CudaRunner, _load

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--batch", type=int, default=160)
p.add_argument("--context", type=int, default=640, help="tokens already in each sequence's context")
p.add_argument("--reps", type=int, default=5)
a = p.parse_args()
torch.set_num_threads(1)
bs, nblk = 16, -(-(a.context + 1) // 16)
chunks = [([7], a.context, list(range(i * nblk, (i + 1) * nblk))) for i in range(a.batch)]
c = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                max_position_embeddings=max(4096, a.context + 1))
runner = CudaRunner(Llama(c).eval(), PagedKVPool(c, a.batch * nblk + 1, bs, torch.float32, "cpu"), max_batch=a.batch)
def best(f):
    ts = []
    for _ in range(a.reps):
        t = time.perf_counter()
        for _ in range(10): f()
        ts.append((time.perf_counter() - t) / 10 * 1e3)
    return min(ts)
b = PagedBatch.build(chunks, bs, 0, "last", "cpu")
build = best(lambda: PagedBatch.build(chunks, bs, 0, "last", "cpu"))
load = best(lambda: _load(runner, b, a.batch))
keys = best(lambda: PagedBatch.build(chunks, bs, 0, "last", "cpu").key_slots)
print(f"{a.batch} decode rows x {a.context} tokens: PagedBatch.build {build:.2f} ms, runner _load {load:.2f} ms; "
      f"build + key-slot structures {keys:.2f} ms (best of {a.reps})")
