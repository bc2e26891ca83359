#!/usr/bin/env python
"""Tensor parallelism on GPUs (issue 24), one JSON line per case; the `tensor_parallel` section of gpu_check.sh.
- TP=1 through the tensor-parallel path (a group of one over NCCL: every all-reduce and gather issued) on the CUDA runner with
  its graphs captured (`TPRunner.warm_up`): greedy tokens and every step's logits equal the single-process CUDA runner's bit
  for bit (prefill through the ragged step, decode steps replaying graphs) -- with one GPU, the unchanged model;
- with 2 GPUs or more: TP=2 (one process per GPU, NCCL), the same comparison: greedy tokens equal, logits within 1e-5 of
  max|logit| (float32; what differs is the order of the row-parallel sums);
- the cost: decode step time (graphs) at batch 1 and 32 of a float16 Llama-2-7B-shaped model cut to 4 layers, TP=1 and (with
  2 GPUs) TP=2, median of 30 steps, ms per step and the ratio.
`--device cpu` is a dry run of the same code on gloo (the CUDA runner on its TorchOps, eager, a tiny model).
Exit status 1 if a check fails."""
import argparse, json, sys, time
import torch
from xllm.stand_ins import RANDOM_CONFIGS
from xllm.weights import config_from_hf
from xllm.model import random_llama, PagedBatch
from xllm.kv_pool import PagedKVPool
from xllm.cuda_runner import CudaRunner, greedy_paged
from xllm.parallel import start_tp, TPRunner

TINY = dict(vocab_size=257, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256)


def step_ms(runner, pool, batch: int, dev, steps: int = 30) -> float:
    "Median ms of a decode step of `batch` rows at context 64 (graphs when captured)."
    bs = pool.block_size
    b = PagedBatch.build([([7], 63, list(range(i * (64 // bs), (i + 1) * (64 // bs)))) for i in range(batch)], bs, pool.null_slot, "last", dev)
    ts = []
    for _ in range(steps + 3):
        if dev.type == "cuda": torch.cuda.synchronize(dev)
        t = time.perf_counter(); runner(b)
        if dev.type == "cuda": torch.cuda.synchronize(dev)
        ts.append(time.perf_counter() - t)
    return sorted(ts[3:])[steps // 2] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), or cpu: a dry run on gloo")
    a = ap.parse_args()
    dev = torch.device(a.device)
    gpus = torch.cuda.device_count() if dev.type == "cuda" else 2
    ok = True
    def report(**r):
        nonlocal ok
        ok &= bool(r.get("pass", True)); print(json.dumps(r), flush=True)
    small = TINY if dev.type == "cpu" else {**RANDOM_CONFIGS["llama2-7b"], "num_hidden_layers": 2, "vocab_size": 32000}
    prompts = [list(range(5, 30)), [11] * 13, [250, 1, 3]]
    for world in [1] + ([2] if gpus >= 2 else []):
        spec = ("random", small, 0, torch.float32)
        ref_model = random_llama(config_from_hf(small, "random"), 0, dtype=torch.float32).to(dev)
        cfg = ref_model.config
        ref_pool = PagedKVPool(cfg, 32, 16, torch.float32, dev)
        ref = CudaRunner(ref_model, ref_pool, max_batch=4, max_model_len=256)
        ref.warm_up()
        t_ref, h_ref = greedy_paged(ref_model, ref_pool, prompts, 8, step=ref, prefill=True)
        m = start_tp(spec, world, device=dev, timeout=120, threads=1 if dev.type == "cpu" else None)
        try:
            pool = PagedKVPool(m.kv_config, 32, 16, torch.float32, m.device)
            tp = TPRunner(m, pool, inner=CudaRunner, max_batch=4, max_model_len=256)
            tp.warm_up()
            t_tp, h_tp = greedy_paged(m, pool, prompts, 8, step=tp, prefill=True)
        finally: m.tp_group.shutdown()
        err = max(float((x.cpu().double() - y.cpu().double()).abs().max() / y.cpu().double().abs().max()) for x, y in zip(h_tp, h_ref))
        tol = 0.0 if world == 1 else 1e-5
        report(case=f"TP={world} CUDA runner ({'graphs' if tp.inner.graphs else 'eager'}) vs the single-process CUDA runner, float32",
               tokens_equal=t_tp == t_ref, max_rel_logits=err, tolerance=tol, graph_steps=tp.inner.num_graph_steps,
               **{"pass": t_tp == t_ref and err <= tol and (dev.type != "cuda" or tp.inner.num_graph_steps == 7)})
    big = TINY if dev.type == "cpu" else {**RANDOM_CONFIGS["llama2-7b"], "num_hidden_layers": 4}
    dt = torch.float32 if dev.type == "cpu" else torch.float16
    times = {}
    for world in [1] + ([2] if gpus >= 2 else []):
        m = start_tp(("random", big, 0, dt), world, device=dev, timeout=120, threads=1 if dev.type == "cpu" else None)
        try:
            pool = PagedKVPool(m.kv_config, 32 * 4 + 1, 16, dt, m.device)
            tp = TPRunner(m, pool, inner=CudaRunner, max_batch=32, max_model_len=256)
            tp.warm_up()
            for b in (1, 32): times[world, b] = step_ms(tp, pool, b, m.device, steps=30 if dev.type == "cuda" else 5)   # a dry run: the plumbing, fewer steps
        finally: m.tp_group.shutdown()
    for b in (1, 32):
        r = {f"tp{w}_ms": round(times[w, b], 3) for w in (1, 2) if (w, b) in times}
        if (2, b) in times: r["tp1_over_tp2"] = round(times[1, b] / times[2, b], 3)
        report(case=f"decode step, batch {b}, {'llama2-7b shape, 4 layers, float16' if dev.type == 'cuda' else 'tiny, float32 (dry run)'}", **r)
    sys.exit(0 if ok else 1)


if __name__ == "__main__": main()
