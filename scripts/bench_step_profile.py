#!/usr/bin/env python
"""Where one 32-row decode step's time goes, on the default model and the default settings (not a test).

    python scripts/bench_step_profile.py [--requests 32] [--prompt-tokens 32] [--max-tokens 64] [--rounds 3] [--model PATH --dtype bfloat16]
                                         [--json bench/results/step_profile.jsonl]

32 requests of 32 distinct random prompt tokens each generate 64 tokens (greedy, EOS ignored) through `LLM`'s engine, as
`xllm bench throughput` runs them. Once every request has its first token (the prefill steps are over), each step is a
32-row decode step; over those steps the script times, per step:
  * `runner`: the model's forward (`engine.runner(batch)`), split by the compiled plan's own phase timers (`ModelPlan.profile`:
    q|k|v, RoPE + K/V append, attention, o_proj, gate|up + SiLU, down, final norm + lm_head; summed over the layers);
  * `schedule` and `update`: the scheduler's two calls; `sample`: the sampler's one batched call (`Sampler.sample_requests`);
  * `other host`: the rest of `Engine.step` (building the batch, stop conditions, outputs).
Rounds alternate the AMX tiles on and off where the CPU has them (`cpu_kernels.amx`), so both sides share the machine's
drift; the median per part over the rounds is recorded with the CPU, flags, load average and the kernels' ISA, one record
per setting, appended to --json (JSON Lines).
"""
import argparse, os, statistics, sys, time
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")     # as the xllm command runs
import torch
from xllm import LLM, SamplingParams, cpu_kernels
from xllm.bench import environment, save_results


class Timed:
    "Wrap callable `fn`, adding its wall time to `acc[key]`; other attributes pass through."
    def __init__(self, fn, acc, key): self.fn, self.acc, self.key = fn, acc, key
    def __call__(self, *a, **k):
        t = time.perf_counter()
        try: return self.fn(*a, **k)
        finally: self.acc[self.key] = self.acc.get(self.key, 0.0) + time.perf_counter() - t
    def __getattr__(self, name): return getattr(self.fn, name)


def one_round(llm, prompts, params) -> dict:
    "Run the requests; ms per 32-row decode step of each part, and of each kernel phase."
    eng = llm.get_engine()
    acc = {}
    runner, sched, sampler = eng.runner, eng.scheduler, eng.sampler
    eng.runner = Timed(runner, acc, "runner")
    sched.schedule, sched.update = Timed(sched.schedule, acc, "schedule"), Timed(sched.update, acc, "update")
    sampler.sample_requests = Timed(sampler.sample_requests, acc, "sample")
    try:
        for p in prompts: eng.add_request(p, params)
        started = set()
        while len(started) < len(prompts):                      # the prefill steps (and the first decode steps of early requests)
            started |= {o.request_id for o in eng.step() if o.new_token_ids}
        acc.clear(); runner.plan.profile(True); steps, total = 0, 0.0
        while eng.has_unfinished():
            t = time.perf_counter(); eng.step(); total += time.perf_counter() - t; steps += 1
        phases = runner.plan.profile(False)
    finally:
        eng.runner = runner
        for obj, name in ((sched, "schedule"), (sched, "update"), (sampler, "sample_requests")): delattr(obj, name)
    parts = {k: v / steps * 1e3 for k, v in acc.items()}
    parts["other host"] = total / steps * 1e3 - sum(parts.values())
    return {"steps": steps, "step_ms": total / steps * 1e3, "parts_ms": parts, "phases_ms": {k: v * 1e3 for k, v in phases.items()},
            "barrier_wait_ms": runner.plan.barrier_wait * 1e3}   # a thread's time at the barriers, inside the phases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=32); ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64); ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default=None, help="a model path (default: the default model)")
    ap.add_argument("--dtype", default=None, help="the dtype LLM loads a Hugging Face checkpoint in (default: LLM's)")
    ap.add_argument("--json", default="bench/results/step_profile.jsonl")
    a = ap.parse_args()
    llm = LLM(a.model, **({"dtype": a.dtype} if a.dtype else {}))
    if llm.runner_name != "cpu": sys.exit(f"this profile reads the compiled CPU runner's phase timers; the runner is {llm.runner_name!r}")
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1000, 20000, (a.prompt_tokens,), generator=g).tolist() for _ in range(a.requests)]
    params = SamplingParams(temperature=0, max_tokens=a.max_tokens, ignore_eos=True)
    settings = ["on", "off"] if cpu_kernels.amx() in ("on", "off") else [None]
    one_round(llm, prompts, params)                             # warm: kernels built, buffers grown
    runs = {s: [] for s in settings}
    for r in range(a.rounds):
        for s in settings:
            if s is not None: cpu_kernels.amx(s == "on")
            env = environment()
            runs[s].append((env, one_round(llm, prompts, params)))
            print(f"round {r + 1} amx {s}: {runs[s][-1][1]['step_ms']:.2f} ms/step, load {env['load_avg'][0]}", file=sys.stderr, flush=True)
    recs = []
    for s, rs in runs.items():
        if s is not None: cpu_kernels.amx(s == "on")
        med = lambda f: statistics.median(f(x) for _, x in rs)
        rec = {**rs[0][0], "name": "step-profile", "workload": f"{a.requests}x({a.prompt_tokens}+{a.max_tokens})", "runner": "cpu",
               "model": os.path.basename(str(llm.model_path)), "dtype": a.dtype, "activations": llm.activations, "isa_kernel": cpu_kernels.isa(),
               "amx": s, "rounds": a.rounds, "load_avg_rounds": [e["load_avg"][0] for e, _ in rs],
               "step_ms": med(lambda x: x["step_ms"]),
               "parts_ms": {k: med(lambda x: x["parts_ms"][k]) for k in rs[0][1]["parts_ms"]},
               "phases_ms": {k: med(lambda x: x["phases_ms"][k]) for k in rs[0][1]["phases_ms"]},
               "barrier_wait_ms": med(lambda x: x["barrier_wait_ms"])}
        recs.append(rec)
        print(f"amx {s}: {rec['step_ms']:.2f} ms per {a.requests}-row decode step | " + ", ".join(f"{k} {v:.2f}" for k, v in rec["parts_ms"].items()))
        print("  runner phases: " + ", ".join(f"{k} {v:.2f}" for k, v in rec["phases_ms"].items()) + f" (a thread's wait at the barriers in them: {rec['barrier_wait_ms']:.2f})")
    if a.json: print("wrote", save_results(recs, a.json))


if __name__ == "__main__":
    main()
