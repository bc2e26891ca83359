"Speculative decoding (prompt lookup) on and off at batch 1 on the default model, greedy outputs asserted equal: decode tok/s, acceptance. Usage: python scripts/bench_speculative.py [rounds] [out.json] (notebook 14a tables the record)."
import statistics, time, json, os, platform, subprocess, sys
from xllm.llm import LLM
from xllm.sampling import SamplingParams
from xllm.bench import workload
from xllm.core import default_model_path
def load(): return os.getloadavg()[0]
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines() if l.startswith("Model name")), "?")
llm = LLM(default_model_path(), speculative={"method": "ngram"}, max_num_seqs=4)
eng = llm.get_engine(); cfg = eng.speculative
def run(on, ids, n=128):
    eng.speculative = cfg if on else None
    eng.add_request(ids, SamplingParams(temperature=0, max_tokens=n))
    t_dec, n_dec, first, toks = 0.0, 0, True, []
    while eng.has_unfinished():
        t = time.perf_counter(); outs = eng.step(); dt = time.perf_counter() - t
        m = sum(len(o.new_token_ids) for o in outs); toks += [t for o in outs for t in o.new_token_ids]
        if not first: t_dec += dt; n_dec += m
        first = False
    return n_dec, t_dec, toks
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
out = {"name": "speculative-ngram", "commit": subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "date": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu, "threads": __import__("torch").get_num_threads(), "rounds": rounds, "max_tokens": 128, "workloads": {}}
for spec in ("grounded", "prompts:4"):
    _, prompts, _ = workload(spec)
    s0 = (eng.spec_stats.num_proposed, eng.spec_stats.num_accepted, eng.spec_stats.num_emitted, eng.spec_stats.num_verifications)
    tot = {True: [0, 0.0], False: [0, 0.0]}; ratios = []; loads = []
    for r in range(rounds):
        for i, p in enumerate(prompts):
            ids = llm.encode_chat([{"role": "user", "content": p}])[1]
            loads.append(load())
            res = {on: run(on, ids) for on in ((True, False) if (i + r) % 2 else (False, True))}
            assert res[True][2] == res[False][2], "greedy outputs differ"
            for on in res: tot[on][0] += res[on][0]; tot[on][1] += res[on][1]
            ratios.append((res[True][0] / res[True][1]) / (res[False][0] / res[False][1]))
    st = eng.spec_stats
    prop, acc, emit, ver = (st.num_proposed - s0[0], st.num_accepted - s0[1], st.num_emitted - s0[2], st.num_verifications - s0[3])
    w = {"off_tok_s": tot[False][0] / tot[False][1], "on_tok_s": tot[True][0] / tot[True][1], "median_ratio": statistics.median(ratios),
         "acceptance": acc / prop if prop else 0.0, "mean_accepted_length": emit / ver if ver else 0.0, "prompts": len(prompts),
         "load_min": min(loads), "load_max": max(loads)}
    w["ratio"] = w["on_tok_s"] / w["off_tok_s"]
    out["workloads"][spec] = w
    print(spec, json.dumps(w))
json.dump(out, open(sys.argv[2] if len(sys.argv) > 2 else "bench/results/speculative_ngram.json", "w"), indent=1)
