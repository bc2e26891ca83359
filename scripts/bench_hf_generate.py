#!/usr/bin/env python
"""Hugging Face transformers `generate` on the same random-weight model as `xllm bench --random-weights` (same config, same
seed, same tokenizer: byte tokens unless --tokenizer): per workload FILE:BATCH:MAX_TOKENS, all requests in one left-padded
batch, greedy, exactly MAX_TOKENS new tokens each (EOS ignored). Prints one JSON line per workload with output tokens/s, a
record of xllm.bench's schema (name "hf-generate").
With --check N, also checks that xllm's engine produces the same greedy tokens as generate for N prompts of the first workload
(float32 recommended for that: fp16 near-ties may flip)."""
import argparse, json, time
from pathlib import Path
import torch
from xllm.bench import environment
from xllm.llm import random_llm
from xllm.quant import hf_config_dict

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--random-weights", required=True, metavar="CONFIG")
p.add_argument("--workload", action="append", required=True, metavar="FILE:BATCH:MAX_TOKENS")
p.add_argument("--device", default="cpu")
p.add_argument("--dtype", default="float16")
p.add_argument("--tokenizer", default=None)
p.add_argument("--check", type=int, default=0, metavar="N")
p.add_argument("--json", default=None, help="append the JSON lines to this file")
a = p.parse_args()

from transformers import LlamaConfig as HFConfig, LlamaForCausalLM
llm = random_llm(a.random_weights, device=a.device, dtype=a.dtype, tokenizer=a.tokenizer, kv_cache_memory=2**26, max_num_seqs=max(1, a.check))
d = hf_config_dict(llm.config); d.pop("torch_dtype", None)
with torch.device("meta"): hf = LlamaForCausalLM(HFConfig(**d))
sd = llm.model.state_dict()
if llm.config.tie_word_embeddings: sd.pop("lm_head.weight", None)
hf.load_state_dict(sd, assign=True, strict=False)                       # the same tensors: no second copy of the weights
if llm.config.tie_word_embeddings: hf.tie_weights()
rot = hf.model.rotary_emb                                                # its buffers are computed, not loaded: build it on the device
hf.model.rotary_emb = type(rot)(config=hf.config).to(llm.model.device)
left = [n for n, t in [*hf.named_parameters(), *hf.named_buffers()] if t.is_meta]
if left: raise RuntimeError(f"weights not loaded into the transformers model: {left[:5]}")
hf = hf.eval()
dev = llm.model.device
sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)

def generate(ids, n):
    "One left-padded batch through generate: exactly n new tokens per row, greedy, ids past the tokenizer suppressed (as xllm does)."
    L = max(map(len, ids))
    inp = torch.tensor([[0] * (L - len(x)) + x for x in ids], device=dev)
    mask = torch.tensor([[0] * (L - len(x)) + [1] * len(x) for x in ids], device=dev)
    kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
    if llm.tokenizer.vocab_size < llm.config.vocab_size: kw["suppress_tokens"] = list(range(llm.tokenizer.vocab_size, llm.config.vocab_size))
    with torch.inference_mode(): return hf.generate(input_ids=inp, attention_mask=mask, **kw)[:, L:]

generate([[1, 2, 3]] * max(int(w.rsplit(":", 2)[1]) for w in a.workload), 2)   # warm-up at the largest batch (cuBLAS picks its kernels per shape)
first = None
for w in a.workload:
    f, b, n = w.rsplit(":", 2); b, n = int(b), int(n)
    prompts = [l.strip() for l in Path(f).read_text(encoding="utf-8").splitlines() if l.strip()]
    ids = [llm.encode_prompt(s)[1] for s in (prompts * -(-b // len(prompts)))[:b]]
    first = first or (ids, n)
    env = environment()
    sync(); t0 = time.perf_counter()
    out = generate(ids, n)
    sync(); wall = time.perf_counter() - t0
    r = dict(name="hf-generate", workload=w, runner="transformers.generate", **env, model=f"random-{Path(a.random_weights).stem}", config=a.random_weights, device=a.device, dtype=a.dtype, requests=len(ids),
             prompt_tokens=sum(map(len, ids)), max_tokens=n, output_tokens=out.numel(), wall_s=wall, output_tok_s=out.numel() / wall)
    if dev.type == "cuda": r["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    if a.check and w == a.workload[0]:
        from xllm.sampling import SamplingParams
        ids_c = ids[:a.check]
        mine = [x.token_ids for x in llm.get_engine().generate([(x, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)) for x in ids_c])]
        theirs = [generate([x], n)[0].tolist() for x in ids_c]
        r["greedy_equal"] = mine == theirs
        r["greedy_first_mismatch"] = next(([i, m, t] for i, (m, t) in enumerate(zip(mine, theirs)) if m != t), None)
    line = json.dumps(r)
    print(line, flush=True)
    if a.json:
        with open(a.json, "a") as fh: fh.write(line + "\n")
    del out
    if dev.type == "cuda": torch.cuda.empty_cache()
