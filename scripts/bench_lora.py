"""LoRA throughput (#44): 32 greedy requests spread over 4 rank-16 adapters against the same 32 on the base model, in one run,
interleaved (base, adapters, base, adapters, ...). The LLM is built with `enable_lora`, so both sides run on the same runner.
On the compiled CPU runner its phase timers (`ModelPlan.profile`) also say where each side's steps go (ms a step, medians over
the rounds): the LoRA products land in the phases of the projections they follow.

    python scripts/bench_lora.py [--model PATH] [--rounds 2] [--max-tokens 64] [--json out.json]
"""
import argparse, json, os, statistics, sys, tempfile, time
from pathlib import Path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="the model (default: xllm's default model)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--adapters", type=int, default=4)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    from xllm.llm import LLM
    from xllm.lora import LoRARequest, random_adapter
    from xllm.sampling import SamplingParams
    from xllm.bench import write_whole
    llm = LLM(a.model, enable_lora=True, max_loras=a.adapters, max_lora_rank=a.rank, max_num_seqs=a.requests)
    d = Path(tempfile.mkdtemp())
    loras = [LoRARequest(f"a{k}", k + 1, str(random_adapter(llm.config, d / f"a{k}", r=a.rank, seed=k))) for k in range(a.adapters)]
    prompts = [f"Story {i}: once upon a time, in a land far away," for i in range(a.requests)]
    params = SamplingParams(temperature=0, max_tokens=a.max_tokens, ignore_eos=True)
    per_prompt = [loras[i % a.adapters] for i in range(a.requests)]
    llm.generate(prompts[:2], params, use_tqdm=False, lora_request=per_prompt[:2])           # warm-up: every code path once
    rates, prof = {"base": [], "lora": []}, {"base": [], "lora": []}
    plan = getattr(llm.get_engine().runner, "plan", None)                                    # the compiled CPU runner's
    for _ in range(a.rounds):
        for side in ("base", "lora"):
            if plan is not None: plan.profile(True)
            t0 = time.perf_counter()
            out = llm.generate(prompts, params, use_tqdm=False, lora_request=per_prompt if side == "lora" else None)
            dt = time.perf_counter() - t0
            rates[side].append(sum(len(o.outputs[0].token_ids) for o in out) / dt)
            if plan is not None: prof[side].append(plan.profile(False))
    best = {k: max(v) for k, v in rates.items()}
    res = {"model": llm.model_name, "runner": llm.runner_reason, "requests": a.requests, "adapters": a.adapters, "rank": a.rank,
           "max_tokens": a.max_tokens, "tok_per_s": rates, "ratio_best": best["lora"] / best["base"],
           "ratio_median": statistics.median(lo / b for b, lo in zip(rates["base"], rates["lora"])),
           "profile_ms_per_step": {k: {ph: 1e3 * statistics.median(p[ph] for p in ps) for ph in ps[0]} for k, ps in prof.items() if ps and ps[0]},
           "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    print(json.dumps(res, indent=1))
    if a.json: write_whole(a.json, json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
