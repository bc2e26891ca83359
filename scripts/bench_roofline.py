#!/usr/bin/env python
"""The two ceilings of the device, measured, and the sizes of a model shape that gpu_table.py turns into each workload's roofline:
- copy bandwidth: torch copy_ of a 4 GiB buffer (read + write counted), 20 copies after 3 warm-ups, CUDA events;
- matrix rate: an 8192 x 8192 x 8192 float16 matmul on random data, 10 products after 3 warm-ups;
- the shape: weight bytes one decode step reads (fp16; the embedding is gathered, not read whole), the parameters each token
  multiplies (2 FLOPs each), the lm_head's share, K/V bytes per token of context (fp16), layers, heads and head size.
Prints one JSON line, a record of xllm.bench's schema (name "roofline"). `--device cpu` (gpu_check.sh's dry run): the same
on the CPU with a 64 MiB buffer and 512^3 float32 products, host timers."""
import argparse, json, time
import torch
from xllm.bench import environment
from xllm.stand_ins import random_config

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("config", nargs="?", default="llama2-7b", help="a shape name or a config.json (default llama2-7b)")
p.add_argument("--device", default="cuda")
a = p.parse_args()
dev = torch.device(a.device)
ENV = environment()                                      # the machine before the run

c = random_config(a.config)
attn = c.hidden_size * c.head_dim * (2 * c.num_attention_heads + 2 * c.num_key_value_heads)
per_layer = attn + 3 * c.hidden_size * c.intermediate_size + 2 * c.hidden_size
embed = c.vocab_size * c.hidden_size
n_params = embed * (1 if c.tie_word_embeddings else 2) + c.num_hidden_layers * per_layer + c.hidden_size
step_bytes = (n_params - (0 if c.tie_word_embeddings else embed)) * 2          # fp16
kv_bytes_per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * 2   # K and V, fp16


def timed(fn, reps):
    "Seconds per call of fn, after 3 warm-ups: CUDA events on a GPU, else the host clock."
    for _ in range(3): fn()
    if dev.type == "cuda":
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); e0.record()
        for _ in range(reps): fn()
        e1.record(); e1.synchronize()
        return e0.elapsed_time(e1) / 1000 / reps
    t = time.perf_counter()
    for _ in range(reps): fn()
    return (time.perf_counter() - t) / reps


n = 4 * 2**30 if dev.type == "cuda" else 64 * 2**20
def copy_bandwidth(n: int) -> float:
    "Bytes per second of a device-to-device copy of `n` bytes (read + write); the buffers are freed on return."
    src = torch.empty(n, dtype=torch.uint8, device=dev); dst = torch.empty_like(src)
    return 2 * n / timed(lambda: dst.copy_(src), 20)


bw = copy_bandwidth(n)
m, dt = (8192, torch.float16) if dev.type == "cuda" else (512, torch.float32)
g = torch.Generator(device=dev).manual_seed(0)
x, y = (torch.randn(m, m, generator=g, device=dev, dtype=torch.float32).to(dt) for _ in range(2))
flops = 2 * m**3 / timed(lambda: x @ y, 10)
r = dict(name="roofline", workload=f"copy_ of {n // 2**20} MiB, {m}^3 {str(dt)[6:]} matmul", runner="torch", **ENV, config=a.config, device=str(dev),
         gpu=torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU (dry run): {ENV['cpu']}",
         params=n_params, weight_bytes_per_step=step_bytes, matmul_params=c.num_hidden_layers * per_layer + embed, lm_head_params=embed,
         kv_bytes_per_token=kv_bytes_per_token, num_layers=c.num_hidden_layers, num_heads=c.num_attention_heads, head_dim=c.head_dim,
         copy_bandwidth_gbs=bw / 1e9, matmul_tflops=flops / 1e12, matmul_dtype=str(dt)[6:],
         roofline_step_ms=step_bytes / bw * 1000, roofline_batch1_tok_s=bw / step_bytes)
print(json.dumps(r))
