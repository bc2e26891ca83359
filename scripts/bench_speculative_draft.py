"""Draft-model speculation on the default model at batch 1: the target is SmolLM2-135M-Instruct dequantized to float32
(quantization=None), the draft the same GGUF with its Q4_1 layers packed (the only smaller model sharing its tokenizer that
xllm has here). Decode tok/s (prefill step left out) of the target alone, with the draft (adaptive, and fixed k=4), and of the
Q4_1 model alone; greedy outputs asserted equal; acceptance. Adds "draft" to bench/results/speculative_ngram.json.
Usage: python scripts/bench_speculative_draft.py [rounds] [json]"""
import json, os, statistics, subprocess, sys, time
from xllm.llm import LLM
from xllm.sampling import SamplingParams
from xllm.bench import workload
from xllm.core import default_model_path
from xllm.speculative import SpeculativeConfig

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
path = sys.argv[2] if len(sys.argv) > 2 else "bench/results/speculative_ngram.json"
M = str(default_model_path())
target, q4 = LLM(M, quantization=None, max_num_seqs=1), LLM(M, max_num_seqs=1)
teng, qeng = target.get_engine(), q4.get_engine()
settings = {"f32 target": (teng, None), "f32 target + Q4_1 draft (adaptive)": (teng, {"method": "draft", "model": q4}),
            "f32 target + Q4_1 draft (k=4 fixed)": (teng, {"method": "draft", "model": q4, "num_tokens": 4, "adaptive": False}),
            "Q4_1 alone": (qeng, None)}
cfgs = {}
def run(name, ids, n=128):
    eng, spec = settings[name]
    if spec is not None and name not in cfgs: cfgs[name] = SpeculativeConfig.make(spec)
    eng.speculative = cfgs.get(name)
    if spec is not None and eng.drafter is None: eng.drafter = __import__("xllm.speculative", fromlist=["x"]).draft_proposer(cfgs[name], eng)
    s0 = dict(vars(eng.spec_stats))
    eng.add_request(ids, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    t_dec, n_dec, first, toks = 0.0, 0, True, []
    while eng.has_unfinished():
        t = time.perf_counter(); outs = eng.step(); dt = time.perf_counter() - t
        m = sum(len(o.new_token_ids) for o in outs); toks += [x for o in outs for x in o.new_token_ids]
        if not first: t_dec += dt; n_dec += m
        first = False
    s = eng.spec_stats
    return toks, n_dec, t_dec, s.num_proposed - s0["num_proposed"], s.num_accepted - s0["num_accepted"]

out = {"workloads": {}}
for spec in ("grounded", "prompts:4"):
    _, prompts, _ = workload(spec)
    tot = {k: [0, 0.0, 0, 0] for k in settings}; loads = []
    for r in range(rounds):
        for i, p in enumerate(prompts):
            ids = target.encode_chat([{"role": "user", "content": p}])[1]
            loads.append(os.getloadavg()[0]); ref = None
            names = list(settings) if (i + r) % 2 == 0 else list(settings)[::-1]
            for name in names:
                toks, n, t, prop, acc = run(name, ids)
                if name != "Q4_1 alone":
                    if ref is None: ref = toks
                    assert toks == ref, f"{name}: greedy output differs"
                tot[name][0] += n; tot[name][1] += t; tot[name][2] += prop; tot[name][3] += acc
    base = tot["f32 target"][0] / tot["f32 target"][1]
    out["workloads"][spec] = {name: {"tok_s": v[0] / v[1], "ratio_to_f32_target": v[0] / v[1] / base,
                                     "acceptance": v[3] / v[2] if v[2] else None, "proposed": v[2]} for name, v in tot.items()}
    out["workloads"][spec]["load_min"], out["workloads"][spec]["load_max"] = min(loads), max(loads)
    print(spec, json.dumps(out["workloads"][spec]), flush=True)
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines() if l.startswith("Model name")), "?")
out.update(commit=subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip(),
           date=time.strftime("%Y-%m-%d %H:%M"), cpu=cpu, threads=__import__("torch").get_num_threads(), rounds=rounds, max_tokens=128,
           draft_step_s=dict(teng.drafter.stats.step_time) if teng.drafter else None)
rec = json.load(open(path)) if os.path.exists(path) else {}
rec["draft"] = out
json.dump(rec, open(path, "w"), indent=1)
