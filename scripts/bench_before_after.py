"""Two checkouts of xllm side by side, as issue #37 asks of a refactor: the same measurements of the default model through
`xllm bench`, the two checkouts interleaved (the order alternating each round), each round started only once the 1-minute
load average is under 0.5 (the load average before every run is recorded: between runs it holds the previous run's own two
threads, which decay over a minute); medians and the ratio new / old, and the best run of each side and their ratio. Not a test: timed, and for a quiet machine.

    python scripts/bench_before_after.py OLD_DIR NEW_DIR [--rounds 3] [--only decode,prefill,32] [--cpu-activations float]
                                         [--model PATH --dtype bfloat16] [--json OUT]

OLD_DIR / NEW_DIR: checkouts (e.g. `git worktree add /tmp/old <commit>`); each run imports xllm from its own checkout
(PYTHONPATH) with no XLLM_* variables set, so both get the defaults a user gets -- or, with --cpu-activations, that setting
(`xllm bench --cpu-activations`) on both sides, to measure a path other than the default; with --model (and --dtype), that
model on both sides instead of the default one (a Hugging Face checkpoint in bfloat16, say).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time
from xllm.bench import write_whole

MEASURES = {   # name -> (xllm bench arguments, the record's figure)
    "decode b1 (tg64)": (["decode", "--max-tokens", "64", "--reps", "3"], "tok_s"),
    "prefill 128": (["prefill", "--prompt-tokens", "128", "--reps", "3"], "tok_s"),
    "32 x (32 + 64), wall": (["throughput", "--workload", "prompts:32:64", "--ignore-eos"], "output_tok_s"),
    "ngram, grounded x8 sequential": (["throughput", "--workload", "grounded:8:128", "--chat", "--speculative", "ngram", "--sequential"],
                                      "output_tok_s"),
}


def wait_quiet(limit: float = 0.5, most: float = 300.0) -> float:
    "Wait (at most `most` s) until the 1-minute load average is under `limit`; the load average then."
    t0 = time.time()
    while os.getloadavg()[0] >= limit and time.time() - t0 < most: time.sleep(5)
    return os.getloadavg()[0]


def run_in(checkout: str, argv: list[str], what: str, name: str) -> tuple[str, float]:
    """`argv` + [a temporary file called `name`] run with `checkout`'s xllm (PYTHONPATH, in it, no XLLM_* variables): the text the command
    wrote to that file, and the load average before it. A failed run ends the script, naming `what` with its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLLM_")}
    env["PYTHONPATH"] = checkout
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, name)
        p = subprocess.run([*argv, out], cwd=checkout, env=env, capture_output=True, text=True)
        if p.returncode: raise SystemExit(f"{checkout}: {what} failed:\n{p.stderr[-2000:]}")
        with open(out) as f: return f.read(), load


def run(checkout: str, args: list[str], key: str, extra: tuple[str, ...] = ()) -> tuple[float, float]:
    "One `xllm bench` run in `checkout`: (its figure, the load average before it)."
    text, load = run_in(checkout, [sys.executable, "-m", "xllm", "bench", *args, *extra, "--json"], f"xllm bench {' '.join([*args, *extra])}", "r.json")
    return json.loads(text)[key], load


def revision(checkout: str) -> str:
    "The commit `checkout` has checked out (12 hex digits), `+dirty` when its tracked files have changes (what ran was not that commit)."
    git = lambda *args: subprocess.run(["git", "-C", checkout, *args], capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "--short=12", "HEAD") + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old"); ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--only", default="", help="comma list of measures to run (the start of their names: decode, prefill, 32, ngram); default all")
    ap.add_argument("--cpu-activations", choices=("float", "int8", "int8x2"), help="passed to both sides' xllm bench (default: theirs)")
    ap.add_argument("--model", help="a model path or name for both sides' xllm bench (default: the default model)")
    ap.add_argument("--dtype", help="the dtype both sides load --model in (xllm bench --dtype)")
    a = ap.parse_args()
    if a.model and os.path.exists(a.model): a.model = os.path.abspath(a.model)   # each side runs in its own checkout
    extra = (("--cpu-activations", a.cpu_activations) if a.cpu_activations else ()) + (("-m", a.model) if a.model else ()) + (("--dtype", a.dtype) if a.dtype else ())
    only = [w.strip() for w in a.only.split(",") if w.strip()]
    measures = {m: v for m, v in MEASURES.items() if not only or any(m.startswith(w) for w in only)}
    if not measures: sys.exit(f"--only {a.only!r} names none of: {', '.join(MEASURES)}")
    cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if l.startswith("Model name")), "?")
    res = {m: {"old": [], "new": []} for m in measures}
    loads = []
    for r in range(a.rounds):
        print(f"round {r + 1}: load average {wait_quiet():.2f} at its start", flush=True)
        for name, (args, key) in measures.items():
            for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                v, load = run(getattr(a, side), args, key, extra)
                res[name][side].append(v); loads.append(load)
                print(f"round {r + 1} {name:32} {side}: {v:9.1f} tok/s (load {load:.2f})", flush=True)
    out = {"cpu": cpu, "old": revision(a.old), "new": revision(a.new), "cpu_activations": a.cpu_activations or "default", "model": a.model or "default",
           "dtype": a.dtype, "rounds": a.rounds, "load_min": min(loads), "load_max": max(loads), "measures": {}}
    print(f"\n{cpu}; old {out['old']}, new {out['new']}; {a.rounds} rounds interleaved; load before each run {min(loads):.2f}-{max(loads):.2f}")
    for name, v in res.items():
        o, n = statistics.median(v["old"]), statistics.median(v["new"])
        bo, bn = max(v["old"]), max(v["new"])    # the best run of each: the least disturbed by anything else on the machine
        out["measures"][name] = {"old_tok_s": o, "new_tok_s": n, "ratio": n / o, "old_best": bo, "new_best": bn, "best_ratio": bn / bo,
                                 "old_all": v["old"], "new_all": v["new"]}
        print(f"{name:32} medians old {o:9.1f}  new {n:9.1f}  ratio {n / o:.3f}   best old {bo:9.1f}  new {bn:9.1f}  ratio {bn / bo:.3f}")
    if a.json: write_whole(a.json, json.dumps(out, indent=1) + "\n")   # whole or not at all


if __name__ == "__main__":
    main()
