"""Speculative decoding with continuous batching: 32 requests submitted together on the default model, off / on (defaults: speculation
only in steps with at most max_batch_size=8 decoding sequences) / on with the switch lifted (max_batch_size=64: the cost model alone
decides), after a warm-up run (the prompts then in the prefix cache for every setting alike), rounds interleaved, greedy outputs asserted equal. Wall tok/s (prefill included) and decode-step tok/s. Adds "batch" to
bench/results/speculative_ngram.json (notebook 14a tables it). Usage: python scripts/bench_speculative_batch.py [rounds] [json]"""
import json, os, statistics, subprocess, sys, time
from xllm.llm import LLM
from xllm.sampling import SamplingParams
from xllm.bench import workload
from xllm.core import default_model_path

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
path = sys.argv[2] if len(sys.argv) > 2 else "bench/results/speculative_ngram.json"
llm = LLM(default_model_path(), max_num_seqs=32)
eng = llm.get_engine()
settings = {"off": None, "on": {"method": "ngram"}, "on_max_batch_64": {"method": "ngram", "max_batch_size": 64}}
from xllm.speculative import SpeculativeConfig

def run(spec, prompts, n):
    eng.speculative = SpeculativeConfig.make(spec)
    s0 = dict(vars(eng.spec_stats)); steps0 = eng.num_steps
    ids = [llm.encode_chat([{"role": "user", "content": p}])[1] for p in prompts]
    rids = [eng.add_request(x, SamplingParams(temperature=0, max_tokens=n)) for x in ids]
    toks = {r: [] for r in rids}
    t0 = time.perf_counter(); t_dec = 0.0; n_dec = 0
    while eng.has_unfinished():
        t = time.perf_counter(); outs = eng.step(); dt = time.perf_counter() - t
        for o in outs: toks[o.request_id] += o.new_token_ids
        m = sum(len(o.new_token_ids) for o in outs)
        if eng.history[-1][2] == 0: t_dec += dt; n_dec += m            # steps with nobody waiting: the decode phase
    wall = time.perf_counter() - t0
    s = eng.spec_stats
    d = {k: getattr(s, k) - s0[k] for k in ("num_verifications", "num_proposed", "num_accepted", "num_emitted")}
    out = sum(len(v) for v in toks.values())
    return [toks[r] for r in rids], {"wall_tok_s": out / wall, "decode_tok_s": n_dec / t_dec if t_dec else None, "steps": eng.num_steps - steps0, **d}

res = {"workloads": {}}
for spec in ("prompts:32:64", "grounded:32:64"):
    _, prompts, n = workload(spec)
    per = {k: [] for k in settings}; ref = None; loads = []
    ref, _ = run(None, prompts, n)                 # warm-up, not counted: afterwards every run finds the prompts in the prefix cache
    for r in range(rounds):
        order = list(settings) if r % 2 == 0 else list(settings)[::-1]
        for name in order:
            loads.append(os.getloadavg()[0])
            toks, fig = run(settings[name], prompts, n)
            if ref is None: ref = toks
            assert toks == ref, f"{spec} {name}: greedy outputs differ"
            per[name].append(fig); print(spec, r, name, json.dumps(fig), f"load {loads[-1]:.2f}", flush=True)
    w = {}
    for name, figs in per.items():
        med = lambda k: statistics.median(f[k] for f in figs)
        w[name] = {"wall_tok_s": med("wall_tok_s"), "decode_tok_s": med("decode_tok_s"), "steps": med("steps"),
                   "verifications": sum(f["num_verifications"] for f in figs), "proposed": sum(f["num_proposed"] for f in figs),
                   "accepted": sum(f["num_accepted"] for f in figs)}
        w[name]["wall_ratio"] = w[name]["wall_tok_s"] / statistics.median(f["wall_tok_s"] for f in per["off"])
    w["load_min"], w["load_max"] = min(loads), max(loads)
    res["workloads"][spec] = w
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines() if l.startswith("Model name")), "?")
res.update(commit=subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip(),
           date=time.strftime("%Y-%m-%d %H:%M"), cpu=cpu, threads=__import__("torch").get_num_threads(), rounds=rounds, max_num_seqs=32)
rec = json.load(open(path)) if os.path.exists(path) else {}
rec["batch"] = res
json.dump(rec, open(path, "w"), indent=1)
print(json.dumps(res, indent=1))
