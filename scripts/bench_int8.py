#!/usr/bin/env python
"""int8 activations against float activations (and llama.cpp), in one run, interleaved rounds (not a test).

    python scripts/bench_int8.py [--llamacpp DIR] [--threads 2] [--rounds 3] [--json bench/results/int8_activations.json]

The default model (SmolLM2-135M Q4_1 GGUF, repacked as INT4 with its Q8_0 tied head) through the compiled CPU runner with
each form of activations of `xllm.cpu_kernels.ACTIVATIONS` ("float", "int8", "int8x2"; chosen by XLLM_CPU_ACTIVATIONS when
the runner is built), measured as `xllm bench` measures (xllm.bench's `decode_rate` = `xllm bench decode`, tg64;
`prefill_rate` = `xllm bench prefill`, pp128) and the 32-sequence engine workload of scripts/bench_vs_llamacpp.py
(32 prompts of 32 tokens, 64 new tokens each, greedy, EOS ignored, output tokens / wall time with the prefill included).
Each round runs llama.cpp (llama-bench pp128/tg64 and llama-batched-bench 32x(32+64), each the better of OpenMP's default
spinning and OMP_WAIT_POLICY=PASSIVE, in the caller's environment without xllm's variables) and then our three forms in
a rotating order; the load average is recorded before each round, and the read bandwidth (xllm.bench.read_bandwidth) measured in it, against
which each form's decode is put (bytes a token read / bandwidth / seconds a token). Perplexity (ctx 512, transformers' Apache-2.0 LICENSE
text, as scripts/bench_vs_llamacpp.py) of each form, of the default (int8 activations, K/V stored as the runner's default
dtype: float16) and of llama-perplexity on the same file, once.
Results: one record of xllm.bench's schema (name "int8-activations") with every round, the medians and the ratios, added to
the records already in --json (one per run, machine after machine).
"""
import argparse, math, os, statistics, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_llamacpp as vs                                          # its llama.cpp runners and our engine workload
for k in [k for k in vs.LLAMA_ENV if k.startswith("XLLM_") or k == "PYTHONPATH"]: vs.LLAMA_ENV.pop(k)   # nothing of xllm's reaches llama.cpp
import torch
from xllm.bench import decode_rate, environment, prefill_rate, read_bandwidth, save_results, weight_bytes

MODES = ("float", "int8", "int8x2")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llamacpp", default=os.environ.get("LLAMACPP_BIN", "/work/llamacpp/bin"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--json", default="bench/results/int8_activations.json")
    ap.add_argument("--text", default=None, help="the perplexity text (default: transformers' Apache-2.0 LICENSE, 4 windows of 512)")
    ap.add_argument("--skip", default="", help="comma list: ppl, engine, llama")
    ap.add_argument("--max-load", type=float, default=1.0, help="before each round, wait (up to --max-wait s) for the 1-minute load average to fall below this")
    ap.add_argument("--max-wait", type=float, default=120)
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    torch.set_num_threads(a.threads)
    from xllm import cpu_kernels as ck
    from xllm.core import default_model_path
    from xllm.quant import load_quantized_gguf
    from xllm.evaluate import perplexity
    from xllm.runner import kv_cache_dtype_for
    from xllm.tokenizer import Tokenizer

    q41 = default_model_path(download=False)
    text = Path(a.text) if a.text else vs.license_text()
    tok = Tokenizer.from_file(q41)
    text_ids = tok.encode(text.read_text(encoding="utf-8"))
    prompt128, prompts = text_ids[:128], vs.engine_prompts(text_ids)
    bin_dir = Path(a.llamacpp)
    have_llama = "llama" not in skip and all((bin_dir / b).is_file() for b in ("llama-bench", "llama-batched-bench", "llama-perplexity"))
    if not have_llama: vs.log(f"llama.cpp binaries not used ({bin_dir}): its rows are skipped")
    res = {"name": "int8-activations", "workload": f"{q41.name} as INT4: decode tg64, prefill pp128, engine 32x(32+64), perplexity of {text.name} (ctx {a.ctx})",
           **environment(), "runner": "cpu", "xllm_cpu_kernels": ck.status(), "isa_kernel": ck.isa(), "model": q41.name,
           "note": "ours: float / int8 / int8x2 activations (XLLM_CPU_ACTIVATIONS), this process's OMP_WAIT_POLICY; llama.cpp: the better of "
                   "spinning and OMP_WAIT_POLICY=PASSIVE, without xllm's environment", "ppl": {}, "rounds": []}
    m = load_quantized_gguf(q41)
    for mod in m.modules():
        if hasattr(mod, "set_kernel"): mod.set_kernel("f32")
    from xllm.llm import LLM
    llms = {}
    for mode in MODES:                                   # one LLM (one engine, one runner) per form, sharing the model
        os.environ["XLLM_CPU_ACTIVATIONS"] = mode
        llms[mode] = LLM.from_model(m, tok, name=q41.name, max_num_seqs=32)
        res.setdefault("runner_description", {})[mode] = llms[mode].get_engine().runner.description   # built now, with this form

    if "ppl" not in skip:
        bos = tok.bos_id if tok.add_bos_token else None
        def ppl(name, kv=None):                          # and each window's log-perplexity: the spread says what a difference means
            W = len(text_ids) // a.ctx
            f = vs.window_logits(m, a.ctx, kv)
            logs = [math.log(perplexity(f, text_ids[c * a.ctx:(c + 1) * a.ctx], a.ctx, bos_id=bos, progress=False)) for c in range(W)]
            res["ppl"][name], res.setdefault("ppl_window_logs", {})[name] = math.exp(sum(logs) / W), logs
            vs.log(f"ppl {name}: {res['ppl'][name]:.4f}")
        for mode in MODES:
            os.environ["XLLM_CPU_ACTIVATIONS"] = mode
            ppl(mode)
        os.environ["XLLM_CPU_ACTIVATIONS"] = "int8"           # the default form: int8 activations, K/V stored as the runner's default
        kv = kv_cache_dtype_for(type(llms["int8"].get_engine().runner), m, None, "int8")
        ppl(f"int8, {kv} K/V (default)", kv)
        base = res["ppl_window_logs"]["float"]
        for name, logs in res["ppl_window_logs"].items():   # vs float: mean and standard error of the per-window differences
            d = [x - y for x, y in zip(logs, base)]
            mu = sum(d) / len(d); sd = math.sqrt(sum((x - mu) ** 2 for x in d) / max(1, len(d) - 1))
            res.setdefault("ppl_vs_float", {})[name] = {"pct": 100 * math.expm1(mu), "sem_pct": 100 * sd / math.sqrt(len(d)), "windows": len(d)}
        if have_llama: res["ppl"]["llama.cpp Q4_1"] = vs.llama_ppl(bin_dir, q41, text, a.threads, a.ctx)

    for i in range(a.rounds):
        t0 = time.perf_counter()
        while os.getloadavg()[0] >= a.max_load and time.perf_counter() - t0 < a.max_wait: time.sleep(5)
        load = [round(x, 2) for x in os.getloadavg()]
        r = {"load_avg": load, "waited_s": round(time.perf_counter() - t0), "quiet": load[0] < a.max_load}
        vs.log(f"round {i + 1}: load average {load}")
        if have_llama:
            lb = vs.best_policy(vs.llama_bench, ("tg64", "pp128"), bin_dir, q41, a.threads, 1)
            r.update(llama_pp128=lb["pp128"], llama_pp128_omp=lb["pp128_omp"], llama_tg64=lb["tg64"], llama_tg64_omp=lb["tg64_omp"])
            if "engine" not in skip:
                bb = vs.best_policy(vs.llama_batched, ("S_TG", "out_tok_s"), bin_dir, q41, a.threads)
                r.update(llama_S_TG=bb["S_TG"], llama_batched_out_tok_s=bb["out_tok_s"], llama_batched_omp=bb["S_TG_omp"])
        r["read_gb_s"] = read_bandwidth(a.threads)                           # the decode's ceiling, measured in the same round
        order = MODES[i % 3:] + MODES[:i % 3]                              # rotating order: no form always goes first
        for mode in order:
            os.environ["XLLM_CPU_ACTIVATIONS"] = mode
            r[f"{mode}_pp128"] = prefill_rate(m, prompt128, 1)
            r[f"{mode}_tg64"] = decode_rate(m, 64, 1)
            if "engine" not in skip:
                e = vs.engine_rate(llms[mode], prompts, 64); r[f"{mode}_engine"], r[f"{mode}_engine_decode"] = e["out_tok_s"], e["decode_tok_s"]
        res["rounds"].append(r); vs.log(f"round {i + 1}: {r}")

    # where a decode token's time goes (batch 1): the plan's phase counters over 64 tokens, and the wall time around them
    from xllm.bench import stream_runner
    from xllm.sampling import greedy_tokens
    res["decode_profile_ms"] = {}
    for mode in MODES:
        os.environ["XLLM_CPU_ACTIVATIONS"] = mode
        run, batch = stream_runner(m, 100)
        with torch.inference_mode():
            tok = greedy_tokens(run(batch([1], 0))[-1:])[0]
            for p in range(1, 8): tok = greedy_tokens(run(batch([tok], p))[-1:])[0]
            run.plan.profile(True); t0 = time.perf_counter()
            for p in range(8, 72): tok = greedy_tokens(run(batch([tok], p))[-1:])[0]
            wall = (time.perf_counter() - t0) / 64; ph = run.plan.profile(False)
        res["decode_profile_ms"][mode] = {**{k: v * 1e3 for k, v in ph.items()}, "outside the plan (Python, batch, argmax)": (wall - sum(ph.values())) * 1e3, "wall": wall * 1e3,
                                          "barrier wait a thread (inside the phases)": run.plan.barrier_wait * 1e3}
        vs.log(f"decode profile {mode}: " + ", ".join(f"{k} {v:.3f}" for k, v in res["decode_profile_ms"][mode].items()))

    # medians over rounds, and the median of the per-round ratios
    R = res["rounds"]
    med = lambda k: statistics.median(r[k] for r in R) if R and all(r.get(k) for r in R) else None
    mratio = lambda k1, k2: statistics.median(r[k1] / r[k2] for r in R) if R and all(r.get(k1) and r.get(k2) for r in R) else None
    keys = [k for k in (R[0] if R else {}) if k not in ("load_avg", "waited_s", "quiet") and not k.endswith("_omp")]
    res["median"] = {k: med(k) for k in keys}
    table = []
    for what, ours, llama in (("prefill pp128", "_pp128", "llama_pp128"), ("decode tg64", "_tg64", "llama_tg64"),
                              ("32 x (32 + 64), incl. prefill", "_engine", "llama_batched_out_tok_s"), ("32 x (32 + 64), decode only vs S_TG", "_engine_decode", "llama_S_TG")):
        for mode in MODES:
            table.append({"what": what, "form": mode, "tok_s": med(mode + ours), "vs_float": mratio(mode + ours, "float" + ours),
                          "vs_llamacpp": mratio(mode + ours, llama) if have_llama else None, "llamacpp_tok_s": med(llama) if have_llama else None})
    res["table"] = table
    # decode against the memory: the bytes a token reads (every weight once; the tied head counted once) at each round's bandwidth
    res["weight_bytes"] = weight_bytes(m)
    share = lambda mode: statistics.median(r[f"{mode}_tg64"] * res["weight_bytes"] / (r["read_gb_s"] * 1e9) for r in R) if R else None
    res["decode_bandwidth_share"] = {mode: share(mode) for mode in MODES}
    print(f"\n{q41.name} INT4, {a.threads} threads, {res['cpu']}, kernels {res['isa_kernel']}, {len(R)} interleaved rounds, "
          f"load averages before each: {[r['load_avg'][0] for r in R]}; medians, ratios = medians of per-round ratios\n")
    print("| measurement | activations | tok/s | vs float | vs llama.cpp | llama.cpp tok/s |\n|---|---|---|---|---|---|")
    f = lambda x, d=1: "-" if x is None else f"{x:.{d}f}"
    for t in table: print(f"| {t['what']} | {t['form']} | {f(t['tok_s'])} | {f(t['vs_float'], 2)}x | {f(t['vs_llamacpp'], 2)}x | {f(t['llamacpp_tok_s'])} |")
    if R: print(f"\ndecode tg64 against the read bandwidth (torch sum of 256 MiB, {a.threads} threads, median {med('read_gb_s'):.1f} GB/s; "
                f"{res['weight_bytes'] / 1e6:.1f} MB a token): " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in res["decode_bandwidth_share"].items()))
    if res["ppl"]:
        print("\nperplexity (ctx %d, %s): " % (a.ctx, text.name) + ", ".join(f"{k} {v:.4f}" for k, v in res["ppl"].items()))
        for k, v in res.get("ppl_vs_float", {}).items():
            if k != "float": print(f"  {k}: {v['pct']:+.2f}% vs float (standard error {v['sem_pct']:.2f}% over {v['windows']} windows)")
    if a.json:       # a .json file keeps every machine's records: this one is added to them (a .jsonl file is appended to)
        save_results([res], a.json, append=True); vs.log(f"written {a.json}")


if __name__ == "__main__":
    main()
