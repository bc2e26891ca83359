#!/usr/bin/env python
"""Measured device copy bandwidth (torch copy_ of a 4 GiB buffer, read + write counted) and the decode roofline of a
Llama-2-7B-shaped fp16 model: weight bytes per decode step / bandwidth = the shortest possible step, so batch-1 tokens/s can
be at most bandwidth / weight bytes. Prints one JSON line, a record of xllm.bench's schema (name "roofline")."""
import json, sys, time
import torch
from xllm.bench import environment
from xllm.stand_ins import random_config

ENV = environment()                                      # the machine before the run

cfg = random_config(sys.argv[1] if len(sys.argv) > 1 else "llama2-7b")
c = cfg
per_layer = c.hidden_size * c.head_dim * (2 * c.num_attention_heads + 2 * c.num_key_value_heads) + 3 * c.hidden_size * c.intermediate_size + 2 * c.hidden_size
n_params = c.vocab_size * c.hidden_size * (1 if c.tie_word_embeddings else 2) + c.num_hidden_layers * per_layer + c.hidden_size
step_bytes = (n_params - c.vocab_size * c.hidden_size * (0 if c.tie_word_embeddings else 1)) * 2   # fp16; the embedding is gathered, not read whole
n = 4 * 2**30
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize()
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
e0.record()
for _ in range(20): b.copy_(a)
e1.record(); e1.synchronize()
bw = 2 * n * 20 / (e0.elapsed_time(e1) / 1000)
r = dict(name="roofline", workload="torch copy_ of 4 GiB", runner="torch", **ENV, config=sys.argv[1] if len(sys.argv) > 1 else "llama2-7b", params=n_params, weight_bytes_per_step=step_bytes, copy_bandwidth_gbs=bw / 1e9,
         roofline_step_ms=step_bytes / bw * 1000, roofline_batch1_tok_s=bw / step_bytes, gpu=torch.cuda.get_device_name())
print(json.dumps(r))
