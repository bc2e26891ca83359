"""Render latency of chat templates per chat request (`apply_chat_template_parts`, what `LLM.chat` and the server call), p50/p99.

    python scripts/bench_template.py [--n 500]

Prints one JSON line: the CPU, the load average and, per conversation, p50/p99 in milliseconds."""
import argparse, json, os, platform, statistics, time
from xllm.chat import apply_chat_template_parts
from xllm.core import default_model_path
from xllm.tokenizer import Tokenizer

def cpu_model():
    try: return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration): return platform.processor()

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--n", type=int, default=500); a = ap.parse_args()
    tok = Tokenizer.from_file(default_model_path())
    short = [{"role": "user", "content": "Name three colours."}]
    long = [{"role": "system", "content": "You are terse."}] + [{"role": r, "content": f"turn {i}: " + "word " * 200}
                                                                 for i, r in zip(range(20), ["user", "assistant"] * 10)]
    out = {"cpu": cpu_model(), "load_avg": os.getloadavg()[0], "n": a.n}
    for name, conv in (("1 message", short), ("20 messages, 20 KB", long)):
        for _ in range(20): apply_chat_template_parts(tok, conv)          # warm: compiled, workers started
        ts = []
        for _ in range(a.n):
            t0 = time.perf_counter(); apply_chat_template_parts(tok, conv); ts.append((time.perf_counter() - t0) * 1e3)
        ts.sort()
        out[name] = {"p50_ms": round(statistics.median(ts), 3), "p99_ms": round(ts[int(0.99 * len(ts)) - 1], 3)}
    print(json.dumps(out))

if __name__ == "__main__": main()
