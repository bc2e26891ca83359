#!/usr/bin/env python
"""Correctness on the GPU against the CPU (issue 9's checks), one JSON line per case:
- a random Llama-2-7B-shaped model's first 2 layers (llama2-7b config, num_hidden_layers=2, float32, the same weights on both
  devices): greedy tokens of 3 prompts x 8 tokens through the paged engine on cpu, on cuda, and on cuda with the CUDA runner
  (graphs) must be equal, and every step's logits within 1e-3 of the max |logit| (relative); the runner's ragged prefill step
  (float and int8 K/V pools) and its decode steps over an int8 K/V pool against the CPU engine on the same pool type (int8:
  logits within 2e-3, as a K/V value on a rounding boundary may take the neighbouring code on the other device; on the CPU,
  TorchOps against the compiled CPU kernels, the int8 difference is 2e-4);
- the default model (SmolLM2-135M GGUF) when it is in the cache (it is not downloaded here): LLM.generate greedy 16 tokens cpu vs
  cuda, float32, with the CudaRunner that LLM attaches on a GPU, with CUDA graphs and with enforce_eager=True: two prompts
  batched, one alone and one streamed (single completions go through the engine too when it has a runner); then with its Q4_1/Q8_0
  layers kept packed (quantization="gguf"), cuda (xllm's INT4/INT8 kernels, float32 and float16) vs the packed model on the CPU.
`--device cpu` is gpu_check.sh's dry run of the same code: a tiny model, the "GPU" side on the CPU (the CUDA runner on its
TorchOps, eager: no graphs to count), the default model left out; every record says dry_run.
Exit status 1 if a check fails."""
import argparse, copy, json, sys
import torch
from xllm.stand_ins import random_model, RANDOM_CONFIGS
from xllm.weights import config_from_hf
from xllm.kv_pool import PagedKVPool
from xllm.cuda_runner import CudaRunner, greedy_paged

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--device", default="cuda", help="cuda (default), or cpu: a dry run on a tiny model")
dev = torch.device(ap.parse_args().device)
dry = dev.type == "cpu"
NAME = "tiny model (dry run: cuda means the cpu here)" if dry else "llama2-7b 2 layers"
graphs_ok = lambda runner: dry or runner.num_graph_steps == 7        # on a GPU every decode step after the first replays a graph
ok = True
def report(**r):
    global ok
    ok &= bool(r.get("pass", True))
    print(json.dumps({**r, "dry_run": True} if dry else r), flush=True)

def rel(hs_a, hs_b): return max(float((a.cpu().double() - b.cpu().double()).abs().max() / a.cpu().double().abs().max()) for a, b in zip(hs_a, hs_b))

TINY = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0)
cfg = config_from_hf(TINY, "tiny (dry run)") if dry else config_from_hf({**RANDOM_CONFIGS["llama2-7b"], "num_hidden_layers": 2}, "llama2-7b, first 2 layers")
cpu_model = random_model(cfg, "cpu", torch.float32, seed=0)
gpu_model = copy.deepcopy(cpu_model).to(dev)
prompts = [list(b"Hello! Who are you"), list(b"You are a helpful, respectful and honest assistant."), list(b"Can you tell me how to learn C")]
p_cpu = PagedKVPool(cfg, 16, 16, torch.float32, "cpu")
t_cpu, h_cpu = greedy_paged(cpu_model, p_cpu, prompts, 8)
p_gpu = PagedKVPool(cfg, 16, 16, torch.float32, dev)
t_gpu, h_gpu = greedy_paged(gpu_model, copy.deepcopy(p_gpu), prompts, 8)
e = rel(h_cpu, h_gpu)
report(case=f"{NAME} fp32: engine cuda vs cpu", tokens_equal=t_cpu == t_gpu, max_rel_logits=e, **{"pass": t_cpu == t_gpu and e < 1e-3})
r = CudaRunner(gpu_model, p_gpu, max_batch=4)
r.capture()
t_run, h_run = greedy_paged(gpu_model, p_gpu, prompts, 8, step=r)
e = rel(h_cpu, h_run)
report(case=f"{NAME} fp32: cuda runner (graphs) vs cpu engine", tokens_equal=t_cpu == t_run, max_rel_logits=e, graphs=sorted(r.graphs),
       graph_steps=r.num_graph_steps, **{"pass": t_cpu == t_run and e < 1e-3 and graphs_ok(r)})
# prefill steps through the runner's ragged step (every row on the paged kernel, then only the decode rows), and an int8 K/V pool
from xllm.model import PagedBatch
tables = [[0, 1], [2, 3, 4, 5], [6, 7, 8]]
for kvd in (None, "int8"):
    pc, pg = PagedKVPool(cfg, 16, 16, torch.float32, "cpu", kv_dtype=kvd), PagedKVPool(cfg, 16, 16, torch.float32, dev, kv_dtype=kvd)
    want = cpu_model(PagedBatch.build([(p, 0, t) for p, t in zip(prompts, tables)], 16, pc.null_slot, "all", "cpu"), copy.deepcopy(pc))
    for kct in (64, 1):
        rr = CudaRunner(gpu_model, copy.deepcopy(pg), max_batch=4, kernel_chunk_tokens=kct)
        got = rr(PagedBatch.build([(p, 0, t) for p, t in zip(prompts, tables)], 16, pg.null_slot, "all", dev))
        e = rel([want], [got])
        report(case=f"{NAME} fp32: runner ragged prefill (kernel_chunk_tokens={kct}, K/V {kvd or 'fp32'}) vs the cpu torch forward",
               max_rel_logits=e, ragged_steps=rr.num_ragged_steps, **{"pass": e < (2e-3 if kvd else 1e-3) and rr.num_ragged_steps == 1})
    if kvd:
        t8c, h8c = greedy_paged(cpu_model, copy.deepcopy(pc), prompts, 8)
        r8 = CudaRunner(gpu_model, pg, max_batch=4); r8.capture()
        t8g, h8g = greedy_paged(gpu_model, pg, prompts, 8, step=r8)
        e = rel(h8c, h8g)
        report(case=f"{NAME} fp32, int8 K/V: cuda runner (graphs) vs cpu engine", tokens_equal=t8c == t8g, max_rel_logits=e,
               graph_steps=r8.num_graph_steps, **{"pass": t8c == t8g and e < 2e-3 and graphs_ok(r8)})
# fp16 on the GPU vs the float32 CPU reference: a tolerance, tokens printed
g16 = copy.deepcopy(cpu_model).to(dev, torch.float16)
p16 = PagedKVPool(cfg, 16, 16, torch.float16, dev)
t16, h16 = greedy_paged(g16, copy.deepcopy(p16), prompts, 8)
r16 = CudaRunner(copy.deepcopy(g16), p16, max_batch=4); r16.capture()
t16r, h16r = greedy_paged(r16.model, p16, prompts, 8, step=r16)
report(case=f"{NAME} fp16 cuda (engine / runner) vs fp32 cpu", tokens_equal_engine=t16 == t_cpu, tokens_equal_runner=t16r == t_cpu,
       max_rel_logits_engine=rel(h_cpu, h16), max_rel_logits_runner=rel(h_cpu, h16r), **{"pass": rel(h_cpu, h16r) < 2e-2})
del cpu_model, gpu_model, g16

try:
    if dry: raise RuntimeError("dry run")
    from xllm.core import default_model_path
    path = default_model_path(download=False)
except Exception as ex:
    report(case="default model cuda vs cpu", skipped=f"not available here ({type(ex).__name__}: {ex})")
else:
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    outs, runners = {}, {}
    sp, two = SamplingParams(temperature=0, max_tokens=16), ["Hello! Who are you?", "The capital of France is"]
    for d, eager in (("cpu", False), ("cuda", False), ("cuda", True)):
        llm = LLM(path, device=d, dtype="float32", quantization=None, kv_cache_memory=2**28, max_num_seqs=4, enforce_eager=eager)
        outs[d, eager] = ([o.outputs[0].token_ids for o in llm.generate(two, sp, use_tqdm=False)]
                          + [llm.generate("Once upon a time", sp)[0].outputs[0].token_ids, "".join(llm.stream("Write a haiku about the sea.", sp))])
        runners[d, eager] = repr(llm.get_engine().runner)          # on cuda: the CudaRunner build_engine attached (graphs unless eager)
    for eager in (False, True):
        same = outs["cpu", False] == outs["cuda", eager]
        report(case=f"default model, LLM.generate greedy, cuda ({'eager' if eager else 'CUDA graphs'}) vs cpu (fp32)", tokens_equal=same,
               runner=runners["cuda", eager], **{"pass": same and "CudaRunner" in runners["cuda", eager]})
    # the GGUF's Q4_1/Q8_0 layers kept packed (quantization="gguf"): on cuda through the INT4/INT8 kernels (GEMV for <= 16 rows,
    # dequantize + cuBLAS above: the 2-prompt prefill), against the packed model on the CPU (its compiled kernels)
    import xllm.cuda_kernels as ck
    want = [o.outputs[0].token_ids for o in LLM(path, device="cpu", quantization="gguf", kv_cache_memory=2**28, max_num_seqs=4).generate(two, sp, use_tqdm=False)]
    for dt in ("float32", "float16"):
        llm = LLM(path, device="cuda", dtype=dt, quantization="gguf", kv_cache_memory=2**28, max_num_seqs=4)
        got = [o.outputs[0].token_ids for o in llm.generate(two, sp, use_tqdm=False)]
        run = llm.get_engine().runner
        stacked = run is not None and all(isinstance(f, ck.QuantWeight) for pair in run.fused for f in pair)
        report(case=f"default model packed (quantization='gguf'), {dt} cuda runner vs packed cpu, greedy", tokens_equal=got == want,
               first_mismatch=next(([i, a, b] for i, (a, b) in enumerate(zip(got, want)) if a != b), None), runner=repr(run),
               quant_stacks=stacked, **{"pass": stacked and (got == want or dt == "float16")})
sys.exit(0 if ok else 1)
