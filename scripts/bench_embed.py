#!/usr/bin/env python
"""Embedding throughput (issue #45): `LLM.embed` on the default model as a user gets it (Q4_1 GGUF kept packed, the compiled CPU
runner's default activations), and on its float32 weights, against a transformers `LlamaModel` forward of the same float32 weights
(what sentence-transformers runs: last-token pooling, L2-normalized, batches of 32), in the same run, rounds interleaved.

    python scripts/bench_embed.py [--n 256] [--tokens 64] [--rounds 2] [--json bench/results/embed_vs_transformers.json]
    python scripts/bench_embed.py --profile [--max-num-batched-tokens N]

`--profile` says where one `LLM.embed` of the default model spends its time, by counts and CPU time rather than wall time (which a
shared machine makes noisy): the engine steps and tokens per step, the share of the step inside the compiled forward, and that
forward's phases (`ModelPlan.profile`).

Each record names the CPU, its flags, torch's threads and the load average before the round; the vectors' agreement with the
transformers reference (max |difference| of the normalized vectors, lowest cosine similarity) is printed beside the speed."""
import argparse, json, os, platform, subprocess, time
import torch


def cpu_name() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), platform.processor())


def hf_model(llm):
    "A transformers LlamaModel holding `llm`'s float32 weights."
    import transformers
    c = llm.config
    hc = transformers.LlamaConfig(vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
                                  num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
                                  num_key_value_heads=c.num_key_value_heads, head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps,
                                  rope_theta=c.rope_theta, max_position_embeddings=c.max_position_embeddings,
                                  tie_word_embeddings=c.tie_word_embeddings)
    hf = transformers.LlamaModel(hc).eval()
    sd = {k.removeprefix("model."): v for k, v in llm.model.state_dict().items() if k.startswith("model.")}
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    if missing or unexpected: raise SystemExit(f"the weights do not fit transformers' LlamaModel: missing {missing}, unexpected {unexpected}")
    return hf


def hf_embed(hf, texts, batch: int = 32) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([torch.nn.functional.normalize(hf(torch.tensor(texts[i:i + batch])).last_hidden_state[:, -1], dim=-1)
                          for i in range(0, len(texts), batch)])


def profile(llm, texts):
    "One `llm.embed(texts)`: steps, tokens per step, CPU seconds, the compiled forward's share of the wall time and its phases."
    eng = llm.get_engine(); plan = getattr(eng.runner, "plan", None)
    s0, n0 = eng.num_steps, eng.num_batched_tokens
    if plan is not None: plan.profile(True)
    c0, w0 = time.process_time(), time.perf_counter(); llm.embed(texts); cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    phases = plan.profile(False) if plan is not None else {}
    steps = eng.num_steps - s0
    fwd = sum(phases.values()) * steps
    print(f"{steps} steps of {(eng.num_batched_tokens - n0) / max(steps, 1):.0f} tokens (budget {eng.scheduler.max_num_batched_tokens}); "
          f"{cpu:.2f} CPU s, {wall:.2f} s wall, {fwd / wall:.1%} of it in the compiled forward (load {os.getloadavg()[0]:.2f})")
    tot = sum(phases.values()) or 1
    print("  forward phases: " + ", ".join(f"{k} {v / tot:.0%}" for k, v in phases.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=256, help="texts (default 256)")
    ap.add_argument("--tokens", type=int, default=64, help="tokens per text (default 64)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the records here (whole or not at all)")
    ap.add_argument("--profile", action="store_true", help="where the default model's embedding time goes (steps, forward phases), then exit")
    ap.add_argument("--max-num-batched-tokens", type=int, default=None, metavar="N", help="with --profile: the engine's step budget")
    a = ap.parse_args()
    from xllm.llm import LLM
    from xllm.bench import sample_text_path, write_whole
    if a.profile:
        llm = LLM(None, max_num_batched_tokens=a.max_num_batched_tokens)
        ids = llm.tokenizer.encode(sample_text_path().read_text() * 20, add_bos=False)
        texts = [ids[i * 37 % (len(ids) - a.tokens):][:a.tokens] for i in range(a.n)]
        llm.embed(texts[:8])
        return profile(llm, texts)
    default = LLM(None)                                                   # what a user gets: the packed GGUF
    f32 = LLM(None, quantization=None, dtype="float32")                   # its weights dequantized to float32
    hf = hf_model(f32)
    ids = default.tokenizer.encode(sample_text_path().read_text() * 20, add_bos=False)
    texts = [ids[i * 37 % (len(ids) - a.tokens):][:a.tokens] for i in range(a.n)]
    ref = hf_embed(hf, texts[:8]); default.embed(texts[:8]); f32.embed(texts[:8])     # warm-up
    runs = {"xllm default": lambda: torch.tensor(default.embed(texts)), "xllm float32": lambda: torch.tensor(f32.embed(texts)),
            "transformers float32": lambda: hf_embed(hf, texts)}
    records, ref = [], None
    flags = sorted({f for line in open("/proc/cpuinfo") if line.startswith("flags") for f in line.split()[2:]} & {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "avx512_bf16"})
    for r in range(a.rounds):
        for name, f in runs.items():
            load = os.getloadavg()
            t0 = time.perf_counter(); v = f(); t = time.perf_counter() - t0
            if name == "transformers float32": ref = v
            records.append(dict(round=r, name=name, seconds=t, tok_s=a.n * a.tokens / t, n=a.n, tokens=a.tokens, cpu=cpu_name(), flags=flags,
                                threads=torch.get_num_threads(), load_avg=[round(x, 2) for x in load], vectors=v))
            print(f"round {r} {name:22s} {t:7.2f} s  {a.n * a.tokens / t:8.0f} tok/s  (load {load[0]:.2f})", flush=True)
    for rec in records:
        v = rec.pop("vectors")
        rec["max_abs_diff_vs_transformers"], rec["min_cosine_vs_transformers"] = float((v - ref).abs().max()), float((v * ref).sum(-1).min())
    best = {k: min(x["seconds"] for x in records if x["name"] == k) for k in runs}
    med = {k: sorted(x["seconds"] for x in records if x["name"] == k)[len([x for x in records if x["name"] == k]) // 2] for k in runs}
    for k in ("xllm default", "xllm float32"):
        d = max(x["max_abs_diff_vs_transformers"] for x in records if x["name"] == k)
        cos = min(x["min_cosine_vs_transformers"] for x in records if x["name"] == k)
        print(f"{k}: {med['transformers float32'] / med[k]:.2f}x transformers (median), {best['transformers float32'] / best[k]:.2f}x (best); "
              f"max |diff| of the normalized vectors {d:.1e}, lowest cosine similarity {cos:.5f}")
    print(f"CPU: {cpu_name()}, flags {' '.join(flags)}, {torch.get_num_threads()} threads; runner: {default.runner_reason}")
    if a.json:
        write_whole(a.json, json.dumps({"records": records, "runner_default": default.runner_reason, "runner_float32": f32.runner_reason}, indent=1) + "\n")


if __name__ == "__main__":
    main()
