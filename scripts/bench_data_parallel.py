"""What cache-aware routing buys over round robin (notebook 19a): two `xllm serve` replicas behind SGLang's router, under each
policy, the same workload with shared prefixes (PROMPTS "system prompts" of about 250 tokens, each followed by USERS different
short questions, shuffled, CONCURRENCY at a time), once with the K/V cache's default size (every prefix fits each replica) and
once with each replica's cache holding about 10 of the 16 prefixes (`--kv-cache-memory 112M`); each replica's prefix-cache
counters (`vllm:prefix_cache_queries` and `vllm:prefix_cache_hits`, in prompt tokens) and finished requests are read from its
`/metrics` before and after.

    nice -n 19 python scripts/bench_data_parallel.py [--model M] [--prompts 16] [--users 8] [--kv-cache-memory auto 112M]

Needs `pip install 'xllm[router]'`. On a shared 2-core machine the times are indicative; the hit rates depend only on the routing."""
import argparse, json, os, random, re, subprocess, sys, time, urllib.request
import concurrent.futures as cf
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("river stone light garden window letter music winter market bridge forest paper morning engine candle harbor "
         "silver meadow lantern orchard").split()


def system_prompt(k: int, words: int = 220) -> str:
    "The k-th shared prefix: an instruction and a seeded run of words (about 250 tokens with SmolLM2's tokenizer)."
    rng = random.Random(k)
    return f"You are assistant number {k}. Answer briefly. Notes: " + " ".join(rng.choice(WORDS) for _ in range(words)) + "\n\n"


def workload(prompts: int, users: int, seed: int = 0) -> list[str]:
    "Every system prompt followed by each user's question, shuffled."
    out = [system_prompt(k) + f"User {u}: what is {u} plus {k}?\nAnswer:" for k in range(prompts) for u in range(users)]
    random.Random(seed).shuffle(out)
    return out


def counters(url: str) -> dict:
    "A replica's prefix-cache queries and hits (tokens) and finished requests, from its /metrics."
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r: text = r.read().decode()
    total = lambda name: sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name))
    return {"queries": total("vllm:prefix_cache_queries_total"), "hits": total("vllm:prefix_cache_hits_total"),
            "requests": total("vllm:request_success_total")}


def start(model: str, policy: str, kv: str, env):
    "The data-parallel server under `policy` on a port tried at random (another one if the router finds it taken)."
    from xllm.server import launch
    for _ in range(6):
        port = random.randrange(20000, 32000)
        cmd = [sys.executable, "-m", "xllm", "serve", model, "--data-parallel-size", "2", "--router-policy", policy, "--port", str(port),
               "--served-model-name", "model", "--uvicorn-log-level", "warning", "--disable-log-stats",
               *(["--kv-cache-memory", kv] if kv != "auto" else [])]
        try: return launch(cmd, timeout=600, cwd=ROOT, env=env, start_new_session=True)
        except RuntimeError as e:
            if "cannot listen on" not in str(e): raise
    raise SystemExit("six ports in a row were taken")


def run(url: str, prompts: list[str], concurrency: int, max_tokens: int) -> float:
    "Send every prompt (greedy, `max_tokens`), `concurrency` at a time; the seconds it took."
    def one(p):
        body = json.dumps({"model": "model", "prompt": p, "max_tokens": max_tokens, "temperature": 0}).encode()
        req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r: json.loads(r.read())
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(concurrency) as ex: list(ex.map(one, prompts))
    return time.perf_counter() - t0


def measure(model: str, policy: str, kv: str, prompts: list[str], concurrency: int, max_tokens: int, env) -> dict:
    p, url = start(model, policy, kv, env)
    try:
        line = next(l for l in p.out if "data parallel" in l)
        replicas = re.findall(r"(http://\S+) pid \d+", line)
        before = [counters(u) for u in replicas]
        seconds = run(url, prompts, concurrency, max_tokens)
        after = [counters(u) for u in replicas]
    finally:
        p.terminate(); p.wait(120)
    d = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    q, h = sum(x["queries"] for x in d), sum(x["hits"] for x in d)
    return {"hit_rate": round(h / q, 4) if q else 0.0, "queried_tokens": int(q), "hit_tokens": int(h),
            "requests_per_replica": [int(x["requests"]) for x in d], "seconds": round(seconds, 2),
            "requests_per_s": round(len(prompts) / seconds, 3)}


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "unknown")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="the model (default: xllm's default, SmolLM2-135M-Instruct)")
    ap.add_argument("--prompts", type=int, default=16, help="shared system prompts (default 16)")
    ap.add_argument("--users", type=int, default=8, help="users per system prompt (default 8)")
    ap.add_argument("--kv-cache-memory", nargs="+", default=["auto", "112M"], help="each replica's K/V cache, one run per value (auto: the default)")
    ap.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    ap.add_argument("--max-tokens", type=int, default=8, help="tokens generated per request (default 8)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/data_parallel_routing.json"))
    a = ap.parse_args()
    from xllm.core import default_model_path
    from xllm.bench import write_whole
    model = a.model or str(default_model_path())
    prompts = workload(a.prompts, a.users)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    load_before = os.getloadavg()
    runs = [{"kv_cache_memory": kv, "policies": {p: measure(model, p, kv, prompts, a.concurrency, a.max_tokens, env)
                                                  for p in ("round_robin", "cache_aware")}} for kv in a.kv_cache_memory]
    from importlib.metadata import version
    rec = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "model": Path(model).name, "cpu": cpu_model(),
           "cores": os.cpu_count(), "load_average": [round(x, 2) for x in load_before], "load_average_after": [round(x, 2) for x in os.getloadavg()],
           "sglang_router": version("sglang-router"), "replicas": 2,
           "workload": f"{a.prompts} system prompts x {a.users} users = {len(prompts)} requests, {a.concurrency} in flight, "
                       f"greedy, {a.max_tokens} tokens each",
           "command": " ".join(["nice -n 19 python scripts/bench_data_parallel.py", *sys.argv[1:]]), "runs": runs}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    write_whole(a.out, json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
