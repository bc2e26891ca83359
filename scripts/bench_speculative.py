"""Speculative decoding on the default model, timed (not a test); writes bench/results/speculative_ngram.json, which notebook 13b tables.

    python scripts/bench_speculative.py ngram [rounds] [json]   prompt lookup on and off at batch 1 (the record's top level)
    python scripts/bench_speculative.py batch [rounds] [json]   32 requests together: off / on / on with max_batch_size=64 ("batch")
    python scripts/bench_speculative.py draft [rounds] [json]   a draft model at batch 1: float32 target, its Q4_1 GGUF as draft ("draft")

Every mode asserts greedy outputs equal across its settings and records the CPU, threads, commit and load averages.
ngram: each prompt of `grounded` and `prompts:4` (chat template, 128 tokens) with speculation on and off, the order
alternating; decode tok/s without the prefill step, acceptance, mean accepted length.
batch: `prompts:32:64` and `grounded:32:64` submitted together after a warm-up run (every setting then finds the prompts in the
prefix cache alike), rounds interleaved; wall tok/s with the prefill.
draft: xllm has no smaller model sharing SmolLM2's tokenizer, so the target is the default model dequantized to float32
(quantization=None) and the draft its Q4_1 GGUF, packed (the same weights): the target alone, with the draft (adaptive, and
k=4 fixed), and the Q4_1 model alone.
"""
import json, os, statistics, subprocess, sys, time
import torch
from xllm.llm import LLM
from xllm.sampling import SamplingParams
from xllm.bench import workload, write_whole
from xllm.core import default_model_path
from xllm.config import SpeculativeConfig
from xllm.speculative import make_proposer


def machine() -> dict:
    cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines() if l.startswith("Model name")), "?")
    return {"commit": subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip(),
            "date": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu, "threads": torch.get_num_threads()}


def decode_run(eng, ids, params) -> tuple[list[int], int, float]:
    "One request through `eng` alone: (its tokens, tokens after the prefill step, seconds of those steps)."
    eng.add_request(ids, params)
    t_dec, n_dec, first, toks = 0.0, 0, True, []
    while eng.has_unfinished():
        t = time.perf_counter(); outs = eng.step(); dt = time.perf_counter() - t
        m = sum(len(o.new_token_ids) for o in outs); toks += [x for o in outs for x in o.new_token_ids]
        if not first: t_dec += dt; n_dec += m
        first = False
    return toks, n_dec, t_dec


def spec_counts(eng) -> dict: return dict(vars(eng.spec_stats))
def spec_delta(eng, s0: dict) -> dict: return {k: getattr(eng.spec_stats, k) - s0[k] for k in ("num_verifications", "num_proposed", "num_accepted", "num_emitted")}


def ngram(rounds: int) -> dict:
    llm = LLM(default_model_path(), speculative={"method": "ngram"}, max_num_seqs=4)
    eng = llm.get_engine(); cfg = eng.speculative
    params = SamplingParams(temperature=0, max_tokens=128)
    out = {"name": "speculative-ngram", **machine(), "rounds": rounds, "max_tokens": 128, "workloads": {}}
    for spec in ("grounded", "prompts:4"):
        _, prompts, _ = workload(spec)
        s0 = spec_counts(eng)
        tot = {True: [0, 0.0], False: [0, 0.0]}; ratios = []; loads = []
        for r in range(rounds):
            for i, p in enumerate(prompts):
                ids = llm.encode_chat([{"role": "user", "content": p}])[1]
                loads.append(os.getloadavg()[0])
                res = {}
                for on in ((True, False) if (i + r) % 2 else (False, True)):
                    eng.set_speculative(cfg if on else None)
                    res[on] = decode_run(eng, ids, params)
                assert res[True][0] == res[False][0], "greedy outputs differ"
                for on in res: tot[on][0] += res[on][1]; tot[on][1] += res[on][2]
                ratios.append((res[True][1] / res[True][2]) / (res[False][1] / res[False][2]))
        d = spec_delta(eng, s0)
        w = {"off_tok_s": tot[False][0] / tot[False][1], "on_tok_s": tot[True][0] / tot[True][1], "median_ratio": statistics.median(ratios),
             "acceptance": d["num_accepted"] / d["num_proposed"] if d["num_proposed"] else 0.0,
             "mean_accepted_length": d["num_emitted"] / d["num_verifications"] if d["num_verifications"] else 0.0, "prompts": len(prompts),
             "load_min": min(loads), "load_max": max(loads)}
        w["ratio"] = w["on_tok_s"] / w["off_tok_s"]
        out["workloads"][spec] = w
        print(spec, json.dumps(w), flush=True)
    return out


def batch(rounds: int) -> dict:
    llm = LLM(default_model_path(), max_num_seqs=32)
    eng = llm.get_engine()
    settings = {"off": None, "on": {"method": "ngram"}, "on_max_batch_64": {"method": "ngram", "max_batch_size": 64}}
    def run(spec, prompts, n):
        eng.set_speculative(spec)
        s0, steps0 = spec_counts(eng), eng.num_steps
        rids = [eng.add_request(llm.encode_chat([{"role": "user", "content": p}])[1], SamplingParams(temperature=0, max_tokens=n)) for p in prompts]
        toks = {r: [] for r in rids}
        t0 = time.perf_counter()
        while eng.has_unfinished():
            for o in eng.step(): toks[o.request_id] += o.new_token_ids
        wall = time.perf_counter() - t0
        return [toks[r] for r in rids], {"wall_tok_s": sum(map(len, toks.values())) / wall, "steps": eng.num_steps - steps0, **spec_delta(eng, s0)}
    res = {"workloads": {}}
    for spec in ("prompts:32:64", "grounded:32:64"):
        _, prompts, n = workload(spec)
        per = {k: [] for k in settings}; loads = []
        ref, _ = run(None, prompts, n)                 # warm-up, not counted: afterwards every run finds the prompts in the prefix cache
        for r in range(rounds):
            for name in (list(settings) if r % 2 == 0 else list(settings)[::-1]):
                loads.append(os.getloadavg()[0])
                toks, fig = run(settings[name], prompts, n)
                assert toks == ref, f"{spec} {name}: greedy outputs differ"
                per[name].append(fig); print(spec, r, name, json.dumps(fig), f"load {loads[-1]:.2f}", flush=True)
        w = {}
        for name, figs in per.items():
            w[name] = {"wall_tok_s": statistics.median(f["wall_tok_s"] for f in figs), "steps": statistics.median(f["steps"] for f in figs),
                       "verifications": sum(f["num_verifications"] for f in figs), "proposed": sum(f["num_proposed"] for f in figs),
                       "accepted": sum(f["num_accepted"] for f in figs)}
            w[name]["wall_ratio"] = w[name]["wall_tok_s"] / statistics.median(f["wall_tok_s"] for f in per["off"])
        w["load_min"], w["load_max"] = min(loads), max(loads)
        res["workloads"][spec] = w
    return {**res, **machine(), "rounds": rounds, "max_num_seqs": 32}


def draft(rounds: int) -> dict:
    M = str(default_model_path())
    target, q4 = LLM(M, quantization=None, max_num_seqs=1), LLM(M, max_num_seqs=1)
    teng, qeng = target.get_engine(), q4.get_engine()
    cfgs = {"f32 target": (teng, None),
            "f32 target + Q4_1 draft (adaptive)": (teng, SpeculativeConfig.make({"method": "draft", "model": q4})),
            "f32 target + Q4_1 draft (k=4 fixed)": (teng, SpeculativeConfig.make({"method": "draft", "model": q4, "num_tokens": 4, "adaptive": False})),
            "Q4_1 alone": (qeng, None)}
    drafter = make_proposer(cfgs["f32 target + Q4_1 draft (adaptive)"][1], teng.sampler, teng.model.device, teng.tokenizer,
                            teng.max_model_len, teng.pool.num_tokens)   # one draft pool for both draft settings
    params = SamplingParams(temperature=0, max_tokens=128, ignore_eos=True)
    out = {"workloads": {}}
    for spec in ("grounded", "prompts:4"):
        _, prompts, _ = workload(spec)
        tot = {k: [0, 0.0, 0, 0] for k in cfgs}; loads = []
        for r in range(rounds):
            for i, p in enumerate(prompts):
                ids = target.encode_chat([{"role": "user", "content": p}])[1]
                loads.append(os.getloadavg()[0]); ref = None
                for name in (list(cfgs) if (i + r) % 2 == 0 else list(cfgs)[::-1]):
                    eng, cfg = cfgs[name]
                    eng.set_speculative(cfg, drafter if cfg is not None else None); s0 = spec_counts(eng)
                    toks, n, t = decode_run(eng, ids, params)
                    d = spec_delta(eng, s0)
                    if name != "Q4_1 alone":
                        if ref is None: ref = toks
                        assert toks == ref, f"{name}: greedy output differs"
                    tot[name][0] += n; tot[name][1] += t; tot[name][2] += d["num_proposed"]; tot[name][3] += d["num_accepted"]
        base = tot["f32 target"][0] / tot["f32 target"][1]
        w = {name: {"tok_s": v[0] / v[1], "ratio_to_f32_target": v[0] / v[1] / base, "acceptance": v[3] / v[2] if v[2] else None, "proposed": v[2]}
             for name, v in tot.items()}
        w["load_min"], w["load_max"] = min(loads), max(loads)
        out["workloads"][spec] = w
        print(spec, json.dumps(w), flush=True)
    return {**out, **machine(), "rounds": rounds, "max_tokens": 128, "draft_step_s": dict(drafter.stats.step_time)}


if __name__ == "__main__":
    modes = {"ngram": ngram, "batch": batch, "draft": draft}
    if len(sys.argv) < 2 or sys.argv[1] not in modes: sys.exit(__doc__)
    mode, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else (3 if sys.argv[1] != "draft" else 1)
    path = sys.argv[3] if len(sys.argv) > 3 else "bench/results/speculative_ngram.json"
    rec = json.load(open(path)) if os.path.exists(path) else {}
    r = modes[mode](rounds)
    if mode == "ngram": rec = {**r, **{k: v for k, v in rec.items() if k in ("batch", "draft")}}
    else: rec[mode] = r
    write_whole(path, json.dumps(rec, indent=1) + "\n")                    # whole or not at all
