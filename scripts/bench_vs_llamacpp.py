#!/usr/bin/env python
"""xllm against llama.cpp (and transformers) on the default model, in one run, same threads, same text (not a test).

    python scripts/bench_vs_llamacpp.py [--llamacpp DIR] [--threads 2] [--reps 3] [--rounds 5] [--json bench/results/vs_llamacpp.json]

Rows (batch 1 unless said; tok/s; medians of --reps):
  * decode: ours INT4 (the Q4_1 file repacked, `load_quantized_gguf`) vs `llama-bench` Q4_1 tg64; ours INT8 (the Q8_0 file
    repacked) vs llama.cpp Q8_0 tg64; float32 and bfloat16 (ours) vs llama.cpp F32 / BF16; transformers fp32 `generate`.
  * prefill: a 128-token prompt from an empty cache vs `llama-bench` pp128.
  * engine: 32 concurrent requests (32-token prompts, 64 new tokens, greedy, EOS ignored) through xllm's continuous-batching
    engine (INT4 model) vs `llama-batched-bench -npp 32 -ntg 64 -npl 32`: ours as output tokens / wall time with the prefill
    included (stricter than S_TG, which leaves it out), and decode-only (the steps after every prompt has its first token).
  * perplexity on the Apache-2.0 LICENSE text (ctx 512, llama-perplexity's method) vs `llama-perplexity -c 512`.
  * interleaved (--rounds R): R rounds of llama.cpp Q4_1 (pp128, tg64, batched), transformers fp32 decode and ours INT4 back to
    back; the median of the per-round ratios, which drifting load on a shared machine moves much less than separate medians.
The Q8_0/BF16 files are made by `llama-quantize` from an F32 GGUF that this script writes from the Q4_1 file (every Q4_1 value
is exact in float32, so nothing is requantized: `--allow-requantize` is not needed). Files go to --work (default
~/.cache/xllm/bench). llama.cpp binaries come from --llamacpp, $LLAMACPP_BIN or /work/llamacpp/bin; rows needing them are
skipped with a message when they are absent. Results are printed as a table and written as one record of xllm.bench's schema
(name "vs-llamacpp"; --json, default bench/results/vs_llamacpp.json, which notebook 07 quotes its figures from).

llama.cpp runs in the environment this script was started with, less OMP_WAIT_POLICY: each of its speed measurements runs
twice, with OpenMP's default waiting (threads spin a while) and with OMP_WAIT_POLICY=PASSIVE (they sleep), and the better of
the two is kept (`*_omp` says which). xllm's own process runs PASSIVE unless told otherwise, as the xllm command does; that
setting never reaches llama.cpp. The load average is recorded before the run and before each interleaved round.
"""
import argparse, json, os, re, statistics, subprocess, sys, time
from pathlib import Path

LLAMA_ENV = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}   # llama.cpp's environment: the caller's, not xllm's
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # ours (a shared machine: don't spin on descheduled siblings)
import numpy as np, torch
from xllm.bench import decode_rate, environment, prefill_rate, save_results, stream_runner


def log(*a): print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- files

def license_text() -> Path:
    "The Apache-2.0 LICENSE file shipped with transformers (the text the issue's perplexities were measured on)."
    import importlib.metadata as md
    p = next((f.locate() for f in md.distribution("transformers").files if f.name == "LICENSE"), None)
    if p is None: raise FileNotFoundError("transformers' LICENSE file not found; pass --text")
    return Path(p)


def write_f32_gguf(src: Path, dest: Path) -> Path:
    "Copy GGUF `src` with every tensor dequantized to F32 (the gguf package's dequantization), metadata kept, file_type = ALL_F32."
    import gguf
    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dest), arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture": continue
        if f.name == "general.file_type": w.add_key_value(f.name, int(gguf.LlamaFileType.ALL_F32), gguf.GGUFValueType.UINT32); continue
        vt = gguf.GGUFValueType(f.types[0])
        sub = gguf.GGUFValueType(f.types[-1]) if vt == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, f.contents(), vt, sub)
    for t in r.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, data.reshape([int(x) for x in reversed(t.shape)]), raw_dtype=gguf.GGMLQuantizationType.F32)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    return dest


def llama_env(policy: str = "spin") -> dict:
    "llama.cpp's environment: the caller's without OMP_WAIT_POLICY ('spin': OpenMP's default), or with it PASSIVE ('passive')."
    return {**LLAMA_ENV, "OMP_WAIT_POLICY": "PASSIVE"} if policy == "passive" else dict(LLAMA_ENV)


def best_policy(fn, keys, *args) -> dict:
    """`fn(*args, env=...)` under both OpenMP wait policies; the result of the better run by `keys[0]`, each of `keys` (and its
    `_sd`) taken from whichever run was better for it, with `KEY_omp` naming that policy and `omp_runs` keeping both runs."""
    runs = {pol: fn(*args, env=llama_env(pol)) for pol in ("spin", "passive")}
    best = dict(max(runs.values(), key=lambda r: r[keys[0]]))
    for k in keys:
        pol = max(runs, key=lambda p: runs[p][k])
        best.update({k: runs[pol][k], k + "_omp": pol}, **({k + "_sd": runs[pol][k + "_sd"]} if k + "_sd" in runs[pol] else {}))
    best["omp_runs"] = runs
    return best


def run(cmd, timeout=1800, env=None) -> str:
    "Run a llama.cpp tool in `env` (default: `llama_env()`, never this process's own environment)."
    log("$ " + " ".join(map(str, cmd)))
    p = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=timeout, env=llama_env() if env is None else env)
    if p.returncode: raise RuntimeError(f"{cmd[0]} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return p.stdout + "\n" + p.stderr


# ---------------------------------------------------------------- llama.cpp

def llama_bench(bin_dir: Path, model: Path, threads: int, reps: int, env=None) -> dict:
    out = run([bin_dir / "llama-bench", "-m", model, "-t", threads, "-p", 128, "-n", 64, "-r", reps, "-o", "json"], env=env)
    rows = json.loads(out[out.index("["):out.rindex("]") + 1])
    res = {"model_size": rows[0]["model_size"], "model_n_params": rows[0]["model_n_params"], "build": rows[0].get("build_commit")}
    for r in rows:
        key = "pp128" if r["n_prompt"] and not r["n_gen"] else "tg64"
        res[key] = r["avg_ts"]; res[key + "_sd"] = r["stddev_ts"]
    return res


def llama_batched(bin_dir: Path, model: Path, threads: int, env=None) -> dict:
    out = run([bin_dir / "llama-batched-bench", "-m", model, "-t", threads, "-tb", threads, "-c", 4096, "-b", 2048, "-ub", 512,
               "-npp", 32, "-ntg", 64, "-npl", 32], env=env)
    # |    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 10 and cells[0] == "32" and cells[1] == "64" and cells[2] == "32":
            t_pp, s_pp, t_tg, s_tg, t, s = map(float, cells[4:10])
            return {"T_PP": t_pp, "S_PP": s_pp, "T_TG": t_tg, "S_TG": s_tg, "T": t, "S": s, "out_tok_s": 32 * 64 / t}
    raise RuntimeError("llama-batched-bench: result row not found in its output:\n" + out[-2000:])


def llama_ppl(bin_dir: Path, model: Path, text: Path, threads: int, ctx: int) -> float:
    out = run([bin_dir / "llama-perplexity", "-m", model, "-f", text, "-c", ctx, "-b", ctx, "-t", threads])
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", out)
    if not m: raise RuntimeError("llama-perplexity: no final estimate in its output:\n" + out[-2000:])
    return float(m.group(1))


# ---------------------------------------------------------------- ours

def window_logits(model, ctx: int, kv_dtype=None):
    "`perplexity`'s logits_fn through the engine's runner: all logits of one window of `ctx` tokens, K/V stored as `kv_dtype`."
    run, batch = stream_runner(model, ctx, kv_dtype=kv_dtype)
    return lambda w: run(batch(w.tolist(), 0, "all"))


def engine_rate(llm, prompts, max_tokens: int = 64) -> dict:
    "All prompts submitted at once to the engine, greedy, EOS ignored: output tokens / wall time (prefill included)."
    from xllm.sampling import SamplingParams
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    eng = llm.get_engine()
    for rep in range(2):                                      # round 0 warms up
        rids = [eng.add_request(list(p), params) for p in prompts]
        live, n_out, started = set(rids), 0, set()
        t0 = time.perf_counter(); t_dec, n_dec = None, 0
        while live:
            outs = eng.step()
            if t_dec is not None: n_dec += sum(len(o.new_token_ids) for o in outs if o.request_id in live)
            for o in outs:
                if o.request_id not in live: continue
                n_out += len(o.new_token_ids)
                if o.new_token_ids: started.add(o.request_id)
                if o.finished:
                    live.discard(o.request_id)
                    if o.finish_reason == "error": raise RuntimeError(f"request failed: {o.error}")
            if t_dec is None and len(started) == len(rids): t_dec = time.perf_counter()     # every prompt prefilled: decode only from here
        t1 = time.perf_counter(); wall = t1 - t0
    return {"out_tok_s": n_out / wall, "wall_s": wall, "n_out": n_out, "decode_tok_s": n_dec / (t1 - t_dec) if n_dec else None}


def hf_model(ck):
    "transformers' `LlamaForCausalLM` in float32 holding the dequantized weights of checkpoint `ck`."
    import transformers
    from xllm.quant import hf_config_dict
    cfg = transformers.LlamaConfig(**{k: v for k, v in hf_config_dict(ck.config).items() if k not in ("architectures", "model_type", "torch_dtype")})
    hf = transformers.LlamaForCausalLM(cfg).eval()
    sd = dict(ck.weights)
    if cfg.tie_word_embeddings: sd.pop("lm_head.weight", None)
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    if [k for k in missing if k != "lm_head.weight"] or unexpected: raise RuntimeError(f"HF load: missing {missing}, unexpected {unexpected}")
    return hf


@torch.inference_mode()
def hf_decode_rate(ck, n: int = 64, reps: int = 2) -> float:
    "transformers fp32 `generate` (greedy, batch 1) on the dequantized weights: tokens/s of the decode part (prefill of 1 token)."
    hf = ck if isinstance(ck, torch.nn.Module) else hf_model(ck)   # a checkpoint, or a model already built by hf_model
    ids = torch.tensor([[1]])
    rates = []
    for r in range(reps + 1):
        t = time.perf_counter()
        out = hf.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
        if r: rates.append((out.shape[1] - 1) / (time.perf_counter() - t))
    return statistics.median(rates)


def int4_llm(q41):
    "An `LLM` for 32 concurrent sequences whose model is the Q4_1 file repacked as INT4 (`load_quantized_gguf`, as in the rows above)."
    from xllm.llm import LLM
    from xllm.quant import load_quantized_gguf
    from xllm.tokenizer import Tokenizer
    return LLM.from_model(load_quantized_gguf(q41), Tokenizer.from_file(q41), name=q41.name, max_num_seqs=32)


def engine_prompts(text_ids) -> list:
    "The engine workload's 32 prompts of 32 tokens: consecutive slices of the text."
    return [text_ids[i * 32:(i + 1) * 32] for i in range(32)]


def bits_per_weight(nbytes: int, n_params: int) -> float: return 8 * nbytes / n_params


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llamacpp", default=os.environ.get("LLAMACPP_BIN", "/work/llamacpp/bin"), help="directory with llama-bench etc.")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--text", default=None, help="perplexity text (default: transformers' Apache-2.0 LICENSE)")
    ap.add_argument("--work", default=None, help="where the F32/Q8_0/BF16 GGUF files go (default ~/.cache/xllm/bench)")
    ap.add_argument("--json", default="bench/results/vs_llamacpp.json")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: ppl, hf, engine, and our models q8_0, int8, f32, bf16")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the INT4-vs-Q4_1 speed comparisons (0: none)")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    torch.set_num_threads(a.threads)
    from xllm.core import default_model_path, cache_dir
    from xllm.weights import load_checkpoint
    from xllm.model import Llama
    from xllm.tokenizer import Tokenizer
    from xllm.quant import load_quantized_gguf, quantize_model, model_bytes
    from xllm.evaluate import perplexity

    q41 = default_model_path(download=False)
    work = Path(a.work).expanduser() if a.work else cache_dir() / "bench"
    work.mkdir(parents=True, exist_ok=True)
    text = Path(a.text) if a.text else license_text()
    tok = Tokenizer.from_file(q41)
    text_ids = tok.encode(text.read_text(encoding="utf-8"))
    bin_dir = Path(a.llamacpp)
    have_llama = all((bin_dir / b).is_file() for b in ("llama-bench", "llama-batched-bench", "llama-quantize", "llama-perplexity"))
    if not have_llama: log(f"llama.cpp binaries not found in {bin_dir} (llama-bench, llama-batched-bench, llama-quantize, llama-perplexity): "
                          "llama.cpp rows are SKIPPED. Build them (see the docstring) and pass --llamacpp DIR.")
    res = {"name": "vs-llamacpp", "workload": f"{q41.name}: decode tg64, prefill pp128, perplexity of {text.name} (ctx {a.ctx}), engine 32x(32+64)",
           **environment(), "runner": None, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "note": "llama.cpp: the better of OpenMP's default waiting and OMP_WAIT_POLICY=PASSIVE (*_omp); ours: this process's OMP_WAIT_POLICY",
           "model": q41.name, "text": text.name, "text_tokens": len(text_ids), "ctx": a.ctx, "ours": {}, "llamacpp": {}, "hf": {}}
    try:
        from xllm import cpu_kernels
        res["xllm_cpu_kernels"] = cpu_kernels.status()
    except Exception as e: res["xllm_cpu_kernels"] = f"not available: {e}"

    files = {"Q4_1": q41}
    if have_llama:
        f32 = work / "SmolLM2-135M-Instruct.F32.gguf"
        if not f32.exists(): log("writing", f32); write_f32_gguf(q41, f32)
        files["F32"] = f32
        for t in ("Q8_0", "BF16"):
            p = work / f"SmolLM2-135M-Instruct.{t}.gguf"
            if not p.exists(): run([bin_dir / "llama-quantize", f32, p, t, a.threads])
            files[t] = p
        # llama.cpp first (its numbers do not depend on ours)
        for t, p in files.items():
            log(f"llama-bench {t}")
            res["llamacpp"][t] = r = best_policy(llama_bench, ("tg64", "pp128"), bin_dir, p, a.threads, a.reps)
            r["bpw"] = bits_per_weight(r["model_size"], r["model_n_params"])
            if "ppl" not in skip: r["ppl"] = llama_ppl(bin_dir, p, text, a.threads, a.ctx)
        if "engine" not in skip: res["llamacpp"]["batched_Q4_1"] = best_policy(llama_batched, ("S_TG",), bin_dir, q41, a.threads)

    ck = load_checkpoint(q41)
    n_params = sum(v.numel() for k, v in ck.weights.items() if k != "lm_head.weight" or not ck.config.tie_word_embeddings)
    res["n_params"] = n_params
    prompt128 = text_ids[:128]
    makers = {"INT4 (Q4_1)": ("int4", lambda: load_quantized_gguf(q41)),
              "INT8 (Q8_0)": ("q8_0", (lambda: load_quantized_gguf(files["Q8_0"])) if "Q8_0" in files else None),
              "INT8 (F32 quantized)": ("int8", lambda: quantize_model(Llama.from_weights(ck.config, ck.weights), "int8", 32, lm_head=True)),
              "F32": ("f32", lambda: Llama.from_weights(ck.config, ck.weights)),
              "BF16": ("bf16", lambda: Llama.from_weights(ck.config, ck.weights, dtype=torch.bfloat16))}
    from xllm.runner import choose_runner
    for name, (key, make) in makers.items():
        if make is None or key in skip: continue
        log("ours", name)
        m = make()
        res["runner"] = res["runner"] or choose_runner(m)[0].name          # the runner of our first row (INT4: the compiled CPU one)
        r = res["ours"][name] = {"bytes": model_bytes(m)}
        r["tg64"] = decode_rate(m, 64, a.reps)
        r["pp128"] = prefill_rate(m, prompt128, a.reps)
        r["bytes_after_run"] = model_bytes(m)                  # kernels may cache packed copies on first use
        r["bpw"] = bits_per_weight(r["bytes_after_run"], n_params)
        if "ppl" not in skip: r["ppl"] = perplexity(window_logits(m, a.ctx), text_ids, a.ctx, bos_id=tok.bos_id if tok.add_bos_token else None, progress=False)
        del m
    if "engine" not in skip:
        log("ours engine, 32 x (32 + 64), INT4")
        llm = int4_llm(q41)
        res["ours"]["engine_32x_INT4"] = engine_rate(llm, engine_prompts(text_ids), 64)
        del llm
    if "hf" not in skip:
        log("transformers fp32 generate")
        res["hf"]["fp32_tg64"] = hf_decode_rate(ck, 64, max(1, a.reps - 1))

    if a.rounds > 0 and have_llama:
        # The machine is shared and its speed drifts by 2x within minutes: each round runs llama.cpp and ours back to back, and
        # the ratio of each round is kept; the table reports the median ratio and the range.
        log(f"interleaved: {a.rounds} rounds of llama-bench / ours / llama-batched-bench / our engine (Q4_1 file)")
        llm = int4_llm(q41)
        m, prompts = llm.model, engine_prompts(text_ids)
        hf = hf_model(ck) if "hf" not in skip else None
        rounds = res["interleaved"] = []
        for i in range(a.rounds):
            load = [round(x, 2) for x in os.getloadavg()]                   # the machine's load before the round
            lb = best_policy(llama_bench, ("tg64", "pp128"), bin_dir, q41, a.threads, 1)
            r = {"load_avg": load, "llama_pp128": lb["pp128"], "llama_pp128_omp": lb["pp128_omp"], "ours_pp128": prefill_rate(m, prompt128, 1),
                 "llama_tg64": lb["tg64"], "llama_tg64_omp": lb["tg64_omp"], "ours_tg64": decode_rate(m, 64, 1)}
            if hf is not None: r["hf_tg64"] = hf_decode_rate(hf, 64, 1)
            if "engine" not in skip:
                r["llama_S_TG"] = best_policy(llama_batched, ("S_TG",), bin_dir, q41, a.threads)["S_TG"]
                e = engine_rate(llm, prompts, 64); r["ours_engine"], r["ours_engine_decode"] = e["out_tok_s"], e["decode_tok_s"]
            rounds.append(r); log(f"round {i + 1}: {r}")
        del llm, m, hf

    # ---- the table
    L, O = res["llamacpp"], res["ours"]
    def ratio(x, y): return f"{x / y:.2f}x" if x and y else "-"
    def fmt(x, d=1): return "-" if x is None else f"{x:.{d}f}"
    rows = []
    def row(what, ours, theirs, target, d=1): rows.append((what, fmt(ours, d), fmt(theirs, d), ratio(ours, theirs) if "ppl" not in what else
                                                           (f"{100 * (ours / theirs - 1):+.2f}%" if ours and theirs else "-"), target))
    g = lambda d, *ks: (d.get(ks[0], {}) or {}).get(ks[1]) if len(ks) == 2 else d.get(ks[0])
    row("decode tg64, INT4 vs llama.cpp Q4_1", g(O, "INT4 (Q4_1)", "tg64"), g(L, "Q4_1", "tg64"), ">= 1x")
    row("decode tg64, INT8 (Q8_0 file) vs llama.cpp Q8_0", g(O, "INT8 (Q8_0)", "tg64"), g(L, "Q8_0", "tg64"), ">= 1x")
    row("decode tg64, INT8 (quantize_model) vs llama.cpp Q8_0", g(O, "INT8 (F32 quantized)", "tg64"), g(L, "Q8_0", "tg64"), ">= 1x")
    row("decode tg64, INT4 vs transformers fp32 generate", g(O, "INT4 (Q4_1)", "tg64"), g(res["hf"], "fp32_tg64"), ">= 5x")
    row("decode tg64, F32 vs llama.cpp F32", g(O, "F32", "tg64"), g(L, "F32", "tg64"), "")
    row("prefill pp128, INT4 vs llama.cpp Q4_1", g(O, "INT4 (Q4_1)", "pp128"), g(L, "Q4_1", "pp128"), ">= 2x")
    row("prefill pp128, INT8 vs llama.cpp Q8_0", g(O, "INT8 (Q8_0)", "pp128"), g(L, "Q8_0", "pp128"), "")
    row("engine out tok/s 32x(32+64) INT4 vs batched-bench Q4_1 (S_TG)", g(O, "engine_32x_INT4", "out_tok_s"), g(L, "batched_Q4_1", "S_TG"), ">= 3x")
    row("engine out tok/s, both incl. prefill (llama: 2048 / T)", g(O, "engine_32x_INT4", "out_tok_s"), g(L, "batched_Q4_1", "out_tok_s"), "")
    row("engine decode-only tok/s (after every prompt's first token) vs S_TG", g(O, "engine_32x_INT4", "decode_tok_s"), g(L, "batched_Q4_1", "S_TG"), "")
    row("ppl Q4_1 file (INT4) vs llama-perplexity", g(O, "INT4 (Q4_1)", "ppl"), g(L, "Q4_1", "ppl"), "within 1%", 3)
    row("ppl Q8_0 file (INT8) vs llama-perplexity", g(O, "INT8 (Q8_0)", "ppl"), g(L, "Q8_0", "ppl"), "within 1%", 3)
    row("ppl INT8 quantize_model vs our F32", g(O, "INT8 (F32 quantized)", "ppl"), g(O, "F32", "ppl"), "within 0.5%", 3)
    res["table"] = rows
    print(f"\n{q41.name}, {a.threads} threads, {res['date']} UTC, load average {res['load_avg'][0]} before, ours OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY')}, llama.cpp the better of spinning and PASSIVE, medians of {a.reps}\n")
    print("| measurement | ours | reference | ratio | target |\n|---|---|---|---|---|")
    for r in rows: print("| " + " | ".join(r) + " |")
    print("\n| model | bits/weight | tg64 tok/s | pp128 tok/s | ppl |\n|---|---|---|---|---|")
    for k, v in O.items():
        if "bpw" in v: print(f"| ours {k} | {v['bpw']:.2f} | {v['tg64']:.1f} | {v['pp128']:.1f} | {fmt(v.get('ppl'), 3)} |")
    for k, v in L.items():
        if "bpw" in v: print(f"| llama.cpp {k} | {v['bpw']:.2f} | {v['tg64']:.1f} | {v['pp128']:.1f} | {fmt(v.get('ppl'), 3)} |")
    if res.get("interleaved"):
        R = res["interleaved"]
        print(f"\nInterleaved: {len(R)} rounds, each running llama.cpp and ours back to back (INT4 from the Q4_1 file vs llama.cpp Q4_1);"
              " medians, and the median and range of the per-round ratios\n")
        print("(the transformers row compares with transformers fp32 `generate`, not llama.cpp)\n")
        print("| measurement | ours | llama.cpp | ratio (median) | ratio range | target |\n|---|---|---|---|---|---|")
        for what, ko, kl, target in [("decode tg64", "ours_tg64", "llama_tg64", ">= 1x"), ("decode tg64 vs transformers fp32", "ours_tg64", "hf_tg64", ">= 5x"),
                                     ("prefill pp128", "ours_pp128", "llama_pp128", ">= 2x"),
                                     ("engine 32x(32+64) out tok/s vs batched-bench S_TG", "ours_engine", "llama_S_TG", ">= 3x"),
                                     ("engine decode-only tok/s vs S_TG (both without prefill)", "ours_engine_decode", "llama_S_TG", "")]:
            if ko not in R[0] or kl not in R[0]: continue
            q = [r[ko] / r[kl] for r in R]
            print(f"| {what} | {statistics.median(r[ko] for r in R):.1f} | {statistics.median(r[kl] for r in R):.1f} | "
                  f"{statistics.median(q):.2f}x | {min(q):.2f}x - {max(q):.2f}x | {target} |")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        log("wrote", save_results([res], a.json))


if __name__ == "__main__":
    main()
