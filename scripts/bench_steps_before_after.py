#!/usr/bin/env python
"""Two checkouts' decode steps side by side: `scripts/bench_step_profile.py` of each (ms per decode step and per phase of the
compiled plan, after the prompts are in), the two interleaved (the order alternating each round), each round started once
the 1-minute load average is under 0.5. For changes that `bench_before_after.py`'s fixed measures do not reach, such as
attention at long contexts. Medians per side, the ratio old / new of the step time (> 1: faster) and of the attention phase,
and each round's. Not a test: timed, and for a quiet machine.

    python scripts/bench_steps_before_after.py OLD_DIR NEW_DIR --case 1:1500 --case 8:1000 --case 32:32 [--rounds 4] [--json OUT]

--case REQUESTS:PROMPT_TOKENS[:MAX_TOKENS] (max tokens 64 by default). Each run imports xllm from its own checkout
(PYTHONPATH) with no XLLM_* variables set: the defaults a user gets; both sides run this checkout's bench_step_profile.py.
"""
import argparse, json, os, statistics, sys

from bench_before_after import revision, run_in, wait_quiet, write_json


def run(checkout: str, script: str, requests: int, prompt: int, max_tokens: int) -> tuple[dict, float]:
    "One profile (`script`, one round of it) of `checkout`'s xllm: its first record (AMX on, where the CPU has it), and the load average before it."
    text, load = run_in(checkout, [sys.executable, script, "--requests", str(requests), "--prompt-tokens", str(prompt),
                                   "--max-tokens", str(max_tokens), "--rounds", "1", "--json"], "bench_step_profile.py", "r.jsonl")
    return json.loads(text.splitlines()[0]), load


def case(s: str) -> tuple[int, int, int]:
    "REQUESTS:PROMPT_TOKENS[:MAX_TOKENS] -> the three numbers."
    try:
        v = [int(x) for x in s.split(":")]
        if len(v) not in (2, 3) or min(v) < 1 or (len(v) == 3 and v[2] < 2): raise ValueError
    except ValueError: raise argparse.ArgumentTypeError(f"expected REQUESTS:PROMPT_TOKENS[:MAX_TOKENS] (positive integers, at least 2 tokens: "
                                                        f"one decode step), got {s!r}") from None
    return (v[0], v[1], v[2] if len(v) == 3 else 64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old"); ap.add_argument("new")
    ap.add_argument("--case", type=case, action="append", required=True, help="REQUESTS:PROMPT_TOKENS[:MAX_TOKENS]; repeat for several")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json")
    a = ap.parse_args()
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_step_profile.py")   # one script for both sides
    res = {c: {"old": [], "new": []} for c in a.case}
    loads, cpu = [], None
    for r in range(a.rounds):
        print(f"round {r + 1}: load average {wait_quiet():.2f} at its start", flush=True)
        for c in a.case:
            for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                rec, load = run(getattr(a, side), script, *c)
                cpu = cpu or rec.get("cpu")
                res[c][side].append({"step_ms": rec["step_ms"], "attention_ms": rec["phases_ms"].get("attention", float("nan"))})
                loads.append(load)
                print(f"round {r + 1} {c[0]}x({c[1]}+{c[2]}) {side}: {rec['step_ms']:.2f} ms/step, attention {rec['phases_ms'].get('attention', 0):.2f} ms "
                      f"(load {load:.2f})", flush=True)
    out = {"cpu": cpu, "old": revision(a.old), "new": revision(a.new), "rounds": a.rounds, "load_min": min(loads), "load_max": max(loads), "cases": {}}
    print(f"\n{cpu}; old {out['old']}, new {out['new']}; {a.rounds} rounds interleaved; load before each run {min(loads):.2f}-{max(loads):.2f}")
    for c, v in res.items():
        med = lambda side, k: statistics.median(x[k] for x in v[side])
        name = f"{c[0]}x({c[1]}+{c[2]})"
        m = {"old_step_ms": med("old", "step_ms"), "new_step_ms": med("new", "step_ms"),
             "old_attention_ms": med("old", "attention_ms"), "new_attention_ms": med("new", "attention_ms"),
             "rounds_step_old_over_new": [o["step_ms"] / n["step_ms"] for o, n in zip(v["old"], v["new"])]}
        m["step_speedup"] = m["old_step_ms"] / m["new_step_ms"]; m["attention_speedup"] = m["old_attention_ms"] / m["new_attention_ms"]
        out["cases"][name] = m
        print(f"{name:16} step {m['old_step_ms']:.2f} -> {m['new_step_ms']:.2f} ms ({m['step_speedup']:.3f}x), attention "
              f"{m['old_attention_ms']:.2f} -> {m['new_attention_ms']:.2f} ms ({m['attention_speedup']:.3f}x); rounds "
              + " ".join(f"{x:.2f}" for x in m["rounds_step_old_over_new"]))
    if a.json: write_json(a.json, out)


if __name__ == "__main__":
    main()
