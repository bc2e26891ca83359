#!/usr/bin/env python
"""Load on `xllm serve`: 32 concurrent streaming clients against the same 32 requests sent one after another.

    python scripts/bench_server.py [--model PATH] [--n 32] [--min-tokens 16] [--max-tokens 48] [--port 0] [--skip-sequential]

Starts `python -m xllm serve` (default model: SmolLM2-135M-Instruct Q4_1) as a subprocess on a free loopback port, waits for
/health, then sends N greedy /v1/completions requests with the official `openai` client, streaming, each from its own
thread (prompts and lengths differ: lines of bench/prompts.txt with a numbered suffix, max_tokens spread over
[min-tokens, max-tokens], EOS ignored so every request generates exactly its max_tokens). Checks that every streamed text equals `LLM.generate`'s for the same request (computed here
in-process), that the server is left with no request and no used KV block, and prints generated tokens/s when concurrent
and when sequential. Exit status 1 if a text differs or the KV pool is not empty afterwards.
Not a test: timings depend on the machine and on whatever else runs on it.
"""
import argparse, json, os, subprocess, sys, threading, time, urllib.request
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")     # passive OpenMP waiting on a busy machine (as the xllm CLI sets it)


def requests_for(n: int, lo: int, hi: int) -> list[tuple[str, int]]:
    "N (prompt, max_tokens) pairs: the lines of bench/prompts.txt, each with a numbered suffix, lengths spread over [lo, hi]."
    lines = [l.strip() for l in (Path(__file__).parent.parent / "bench" / "prompts.txt").read_text().splitlines() if l.strip()]
    return [(f"{lines[i % len(lines)]} (question {i + 1})", lo + (i * 37) % (hi - lo + 1)) for i in range(n)]


def health(url: str) -> dict:
    with urllib.request.urlopen(url + "/health", timeout=5) as r: return json.loads(r.read())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="model path (default: SmolLM2-135M-Instruct Q4_1)")
    ap.add_argument("--n", type=int, default=32, help="number of requests / concurrent clients (default 32)")
    ap.add_argument("--min-tokens", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    ap.add_argument("--skip-sequential", action="store_true", help="only the concurrent run")
    a = ap.parse_args(argv)
    import openai
    from xllm.core import default_model_path
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    from xllm.server import free_port

    model = Path(a.model) if a.model else default_model_path()
    port = a.port or free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "xllm", "serve", "--model", str(model), "--port", str(port), "--max-num-seqs", str(a.n)]
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = []
    threading.Thread(target=lambda: [log.append(l) for l in proc.stdout], daemon=True).start()
    try:
        reqs = requests_for(a.n, a.min_tokens, a.max_tokens)
        llm = LLM(model)
        t0 = time.perf_counter()
        refs = [o.outputs[0] for o in llm.generate([p for p, _ in reqs], [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for _, n in reqs], use_tqdm=False)]
        t_ref = time.perf_counter() - t0
        ntok = sum(len(r.token_ids) for r in refs)
        print(f"LLM.generate (in-process engine, {a.n} at once): {ntok} tokens in {t_ref:.1f} s ({ntok / t_ref:.1f} tok/s)", flush=True)
        del llm
        t0 = time.time()
        while True:
            try: health(url); break
            except Exception:
                if proc.poll() is not None or time.time() - t0 > 300: print("".join(log)); raise SystemExit("server did not start")
                time.sleep(0.5)
        print("server:", next((l.strip() for l in log if "serving" in l), ""), flush=True)
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600)

        def one(p, n):
            s = client.completions.create(model="m", prompt=p, max_tokens=n, temperature=0, stream=True, extra_body={"ignore_eos": True})
            return "".join(c.choices[0].text for c in s)
        one("Hello", 2)                                             # warm-up
        out, errs = [None] * a.n, []
        def run(i):
            try: out[i] = one(*reqs[i])
            except Exception as e: errs.append(f"{i}: {e!r}")
        ts = [threading.Thread(target=run, args=(i,)) for i in range(a.n)]
        t0 = time.perf_counter()
        for t in ts: t.start()
        for t in ts: t.join()
        t_con = time.perf_counter() - t0
        time.sleep(0.2)
        h = health(url)
        same = sum(o == r.text for o, r in zip(out, refs))
        print(f"concurrent: {a.n} streaming clients, {ntok} tokens in {t_con:.1f} s = {ntok / t_con:.1f} tok/s; "
              f"texts equal to LLM.generate: {same}/{a.n}; errors: {len(errs)}", flush=True)
        print(f"after: unfinished={h['unfinished']} running={h['running']} used_blocks={h['used_blocks']} in_flight={h['in_flight']}", flush=True)
        for i, (o, r) in enumerate(zip(out, refs)):
            if o != r.text: print(f"  request {i} differs:\n    server: {o!r}\n    LLM:    {r.text!r}")
        for e in errs: print("  error", e)
        ok = same == a.n and not errs and h["unfinished"] == h["used_blocks"] == h["in_flight"] == 0
        if not a.skip_sequential:
            t0 = time.perf_counter()
            seq = [one(p, n) for p, n in reqs]
            t_seq = time.perf_counter() - t0
            print(f"sequential: {a.n} requests one after another, {ntok} tokens in {t_seq:.1f} s = {ntok / t_seq:.1f} tok/s; "
                  f"texts equal to the concurrent ones: {sum(x == y for x, y in zip(seq, out))}/{a.n}", flush=True)
            print(f"concurrent / sequential throughput: {t_seq / t_con:.1f}x", flush=True)
        return 0 if ok else 1
    finally:
        proc.terminate()
        try: proc.wait(20)
        except subprocess.TimeoutExpired: proc.kill()


if __name__ == "__main__":
    sys.exit(main())
