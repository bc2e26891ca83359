#!/usr/bin/env python
"""Hugging Face transformers `generate` on the same random-weight model as `xllm bench --random-weights` (same config, same
seed, same tokenizer: byte tokens unless --tokenizer): all requests in one left-padded batch, greedy, exactly --max-tokens new
tokens each (EOS ignored). Prints one JSON line with output tokens/s. With --check N, also checks that xllm's engine produces
the same greedy tokens as generate for the first N prompts (float32 recommended for that)."""
import argparse, json, time
from pathlib import Path
import torch
from xllm.cli import random_llm
from xllm.quant import hf_config_dict

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--random-weights", required=True, metavar="CONFIG")
p.add_argument("--file", required=True)
p.add_argument("--batch", type=int, required=True)
p.add_argument("--max-tokens", type=int, required=True)
p.add_argument("--device", default="cpu")
p.add_argument("--dtype", default="float16")
p.add_argument("--tokenizer", default=None)
p.add_argument("--check", type=int, default=0, metavar="N")
p.add_argument("--json", default=None)
a = p.parse_args()

from transformers import LlamaConfig as HFConfig, LlamaForCausalLM
llm = random_llm(a.random_weights, a.device, a.dtype, a.tokenizer, kv_cache_memory=2**26, max_num_seqs=max(1, a.check))
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
hf.generation_config.pad_token_id = 0

prompts = [l.strip() for l in Path(a.file).read_text(encoding="utf-8").splitlines() if l.strip()]
prompts = (prompts * -(-a.batch // len(prompts)))[:a.batch]
ids = [llm._prompt_ids(s)[1] for s in prompts]
L = max(map(len, ids))
inp = torch.tensor([[0] * (L - len(x)) + x for x in ids], device=hf.device)
mask = torch.tensor([[0] * (L - len(x)) + [1] * len(x) for x in ids], device=hf.device)
kw = dict(max_new_tokens=a.max_tokens, min_new_tokens=a.max_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
if llm.tokenizer.vocab_size < llm.config.vocab_size:                     # xllm never samples ids past the tokenizer; neither may generate
    kw["suppress_tokens"] = list(range(llm.tokenizer.vocab_size, llm.config.vocab_size))

def run(inp, mask):
    with torch.inference_mode(): return hf.generate(input_ids=inp, attention_mask=mask, **kw)

run(inp[:1, -min(L, 8):], mask[:1, -min(L, 8):])                           # warm-up
if hf.device.type == "cuda": torch.cuda.synchronize()
t0 = time.perf_counter()
out = run(inp, mask)
if hf.device.type == "cuda": torch.cuda.synchronize()
wall = time.perf_counter() - t0
n_out = (out.shape[1] - L) * len(ids)
r = dict(engine="transformers.generate", config=a.random_weights, device=a.device, dtype=a.dtype, requests=len(ids), prompt_tokens=sum(map(len, ids)),
         max_tokens=a.max_tokens, output_tokens=n_out, wall_s=wall, output_tok_s=n_out / wall)
if a.check:
    from xllm.sampling import SamplingParams
    eng = llm.get_engine()
    res = eng.generate([(x, SamplingParams(temperature=0, max_tokens=a.max_tokens, ignore_eos=True)) for x in ids[:a.check]])
    mine = [x.token_ids for x in res]
    theirs = [run(torch.tensor([x], device=hf.device), torch.ones(1, len(x), dtype=torch.long, device=hf.device))[0, len(x):].tolist() for x in ids[:a.check]]
    r["greedy_equal"] = mine == theirs
    r["greedy_first_mismatch"] = next(([i, m, t] for i, (m, t) in enumerate(zip(mine, theirs)) if m != t), None)
line = json.dumps(r)
print(line)
if a.json: Path(a.json).write_text(line + "\n")
