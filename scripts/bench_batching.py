"""The continuous-batching speedup: 32 requests submitted together against the same 32 one at a time, on the default model,
greedy, 64 new tokens each (EOS ignored), the chat template, float and int8 activations (XLLM_CPU_ACTIVATIONS, one LLM each);
after a warm-up pass (so both modes find the prompts in the prefix cache alike), `rounds` interleaved rounds; output tok/s by
wall time (prefill included) and whether every request's tokens are the same in both modes. Appends the record (the machine
as `xllm.bench.environment()` names it: CPU, ISA flags, commit, load) to the list in bench/results/batching.json.
Usage: python scripts/bench_batching.py [rounds] [json]"""
import json, os, statistics, sys, time
from xllm.llm import LLM
from xllm.sampling import SamplingParams
from xllm.bench import environment, save_results, workload

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
path = sys.argv[2] if len(sys.argv) > 2 else "bench/results/batching.json"
_, prompts, n = workload("prompts:32:64")
params = SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
llms = {}
for mode in ("float", "int8"):
    os.environ["XLLM_CPU_ACTIVATIONS"] = mode
    llms[mode] = LLM(max_num_seqs=32); llms[mode].get_engine()       # the runner is built now, with this form
msgs = [[{"role": "user", "content": p}] for p in prompts]

def together(llm):
    t = time.perf_counter(); out = llm.chat(msgs, params, use_tqdm=False); dt = time.perf_counter() - t
    return [o.outputs[0].token_ids for o in out], dt
def one_by_one(llm):
    t = time.perf_counter(); out = [llm.chat([m], params, use_tqdm=False)[0] for m in msgs]; dt = time.perf_counter() - t
    return [o.outputs[0].token_ids for o in out], dt

res = {m: {"together_tok_s": [], "one_by_one_tok_s": [], "differing_requests": [], "first_difference": []} for m in llms}
env = environment()                                                     # the machine (CPU, ISA flags, commit, torch), load before the runs
for m, llm in llms.items(): together(llm); one_by_one(llm)               # warm-up: kernels, prefix cache
loads = []
for r in range(rounds):
    for m in (list(llms) if r % 2 == 0 else list(llms)[::-1]):
        loads.append(os.getloadavg()[0])
        runs = [together, one_by_one] if r % 2 == 0 else [one_by_one, together]
        got = {f.__name__: f(llms[m]) for f in runs}
        (a, ta), (b, tb) = got["together"], got["one_by_one"]
        tot = sum(map(len, a))
        res[m]["together_tok_s"].append(tot / ta); res[m]["one_by_one_tok_s"].append(sum(map(len, b)) / tb)
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        res[m]["differing_requests"].append(len(diff))
        res[m]["first_difference"].append(min((next(k for k in range(len(a[i])) if a[i][k] != b[i][k]) for i in diff), default=None))
        print(m, r, f"together {tot / ta:.1f} tok/s, one by one {sum(map(len, b)) / tb:.1f} tok/s, differing {len(diff)}", flush=True)
out = {"name": "continuous-batching", "workload": "prompts:32:64, chat template, greedy, EOS ignored", "runner": "cpu", "rounds": rounds,
       **env, "load_min": min(loads), "load_max": max(loads), "modes": {}}
for m, d in res.items():
    tg, ob = statistics.median(d["together_tok_s"]), statistics.median(d["one_by_one_tok_s"])
    out["modes"][m] = {**d, "together_median": tg, "one_by_one_median": ob, "speedup": statistics.median(x / y for x, y in zip(d["together_tok_s"], d["one_by_one_tok_s"]))}
    print(m, json.dumps(out["modes"][m]))
print("wrote", save_results([out], path, append=True))   # after the records the file holds, written whole or not at all
