"""`xllm bench --random-weights` and what gpu_check.sh runs for its speed table, on a tiny config on the CPU: the CLI bench
JSON, xllm's engine (with and without the CUDA runner's CPU path) against transformers `generate` on the same random model
(greedy tokens equal), the speed sections and their summary table, and the built-in shapes."""
import json, subprocess, sys
from pathlib import Path
import pytest
import torch

from xllm.cli import main

from xllm.stand_ins import random_config

from xllm.llm import random_llm
from xllm.sampling import SamplingParams

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, eos_token_id=2)


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(TINY))
    return p


def test_cli_bench_random_weights(tiny, tmp_path, capsys):
    js = tmp_path / "r.json"
    assert main(["bench", "--random-weights", str(tiny), "--file", str(ROOT / "bench" / "hello.txt"), "--batch", "6", "--max-tokens", "5",
                 "--ignore-eos", "--max-num-seqs", "6", "--json", str(js)]) == 0
    r = json.loads(js.read_text())
    assert (r["requests"], r["output_tokens"], r["prompt_tokens"], r["max_num_seqs"]) == (6, 30, 6 * len("Hello!"), 6)
    assert r["output_tok_s"] > 0 and r["model"] == "random-config"


def test_engine_and_runner_match_transformers_generate(tiny):
    "The comparison gpu_check.sh makes on the GPU, here in float32 on the CPU: the same random model in transformers, greedy."
    transformers = pytest.importorskip("transformers")
    from xllm.quant import hf_config_dict
    from xllm.cuda_runner import CudaRunner
    llm = random_llm(str(tiny), device="cpu", dtype="float32", kv_cache_memory=2**24, max_num_seqs=4, seed=5)
    d = hf_config_dict(llm.config); d.pop("torch_dtype", None)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**d)).eval()
    hf.load_state_dict(llm.model.state_dict(), strict=False)
    prompts = ["Once upon a time", "Hello!", "The park is big and green", "x"]
    ids = [llm.encode_prompt(p)[1] for p in prompts]
    with torch.inference_mode():
        want = [hf.generate(torch.tensor([x]), attention_mask=torch.ones(1, len(x), dtype=torch.long), max_new_tokens=12, min_new_tokens=12,
                            do_sample=False, eos_token_id=None, pad_token_id=0, suppress_tokens=list(range(256, 300)))[0, len(x):].tolist() for x in ids]
    reqs = [(x, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)) for x in ids]
    eng = llm.get_engine()
    assert [r.token_ids for r in eng.generate(reqs)] == want
    eng.runner = CudaRunner(llm.model, eng.pool, max_batch=4, max_model_len=eng.max_model_len)
    assert [r.token_ids for r in eng.generate(reqs)] == want
    assert eng.runner.num_eager_steps >= 10


def test_gpu_check_speed_sections_on_cpu(tiny, tmp_path):
    """What gpu_check.sh runs for its speed table, on the CPU: `xllm bench` over two workloads on one model (and over an int8
    K/V pool), `xllm bench host`, scripts/bench_hf_generate.py --check, then scripts/gpu_table.py over their records."""
    pytest.importorskip("transformers")
    from xllm.bench import SCHEMA
    res = tmp_path / "res"; res.mkdir()
    wl = [f"{ROOT / 'bench' / 'prompts.txt'}:3:4", f"{ROOT / 'bench' / 'hello.txt'}:2:3"]
    bench = ["bench", "--random-weights", str(tiny), "--dtype", "float32", "--ignore-eos", "--max-num-seqs", "3"]
    assert main([*bench, "--workload", wl[0], "--workload", wl[1], "--json", str(res / "xllm_graphs.jsonl")]) == 0
    r, r2 = (json.loads(l) for l in (res / "xllm_graphs.jsonl").read_text().splitlines())
    assert (r["workload"], r["output_tokens"], r["requests"], r2["workload"], r2["output_tokens"]) == (wl[0], 12, 3, wl[1], 6)
    assert r["weight_bytes"] == 4 * sum(p.numel() for p in random_llm(str(tiny), device="cpu", dtype="float32").model.parameters())
    assert all(k in r for k in SCHEMA) and r["name"] == "throughput" and r["model"] == "random-config"
    assert main([*bench, "--workload", wl[0], "--kv-cache-dtype", "int8", "--json", str(res / "xllm_int8kv.jsonl")]) == 0
    r = json.loads((res / "xllm_int8kv.jsonl").read_text())
    assert r["kv_cache_dtype"] == "int8" and "int8" in r["kv_cache_report"] and r["output_tokens"] == 12
    assert main(["bench", "host", "--batch", "8", "--max-tokens", "4", "--reps", "1", "--json", str(res / "engine_host.jsonl")]) == 0
    h = json.loads((res / "engine_host.jsonl").read_text())
    assert h["name"] == "host" and h["steps"] == 4 and h["step_ms"] > 0 and h["build_ms"] > 0
    b = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_hf_generate.py"), "--random-weights", str(tiny), "--workload", wl[0],
                        "--dtype", "float32", "--check", "2", "--json", str(res / "hf.jsonl")], capture_output=True, text=True, timeout=300)
    assert b.returncode == 0, b.stderr
    r = json.loads(b.stdout.strip().splitlines()[-1])
    assert r["output_tokens"] == 12 and r["greedy_equal"] is True and all(k in r for k in SCHEMA)
    t = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_table.py"), str(res)], capture_output=True, text=True, timeout=60)
    assert t.returncode == 0, t.stderr
    rows = t.stdout.splitlines()
    head = next(l for l in rows if l.startswith("workload"))
    assert "int8 K/V" in head and "transformers" in head and "engine host work per step" in t.stdout, t.stdout
    row = next(l for l in rows if l.startswith("prompts.txt batch 3 x 4"))
    assert all(row.split()[k].replace(",", "").isdigit() for k in (5, -1)), row   # this run's tok/s ("2,141"), and the int8 K/V run's
    assert "config.json shape" in t.stdout and "batch 8, prompt 8, 4 tokens" in t.stdout, t.stdout


def test_gpu_check_is_valid_bash():
    "gpu_check.sh parses, and every script it calls exists."
    sh = (ROOT / "scripts" / "gpu_check.sh").read_text()
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_check.sh")]).returncode == 0
    import re
    called = set(re.findall(r"scripts/(\w+\.py)", sh))
    assert called and all((ROOT / "scripts" / f).is_file() for f in called), called


def test_builtin_shapes():
    c = random_config("llama2-7b")
    assert (c.hidden_size, c.num_hidden_layers, c.num_key_value_heads, c.vocab_size, c.head_dim) == (4096, 32, 32, 32000, 128)
    c = random_config("llama3-8b")
    assert (c.num_key_value_heads, c.rope_theta, c.eos_token_id) == (8, 500000.0, [128001, 128009])
    with pytest.raises(ValueError, match="--random-weights"): random_config("nope")


def _vs_llamacpp():
    "scripts/bench_vs_llamacpp.py as a module, imported afresh (it snapshots the environment llama.cpp will get at import)."
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_vs_llamacpp", ROOT / "scripts" / "bench_vs_llamacpp.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


def test_vs_llamacpp_runs_llamacpp_both_ways_in_its_own_environment(tmp_path, monkeypatch):
    """llama.cpp (a stand-in llama-bench that says which OMP_WAIT_POLICY it saw, and is faster at tg64 when PASSIVE, at pp128
    when spinning) runs under both policies, never with the OMP_WAIT_POLICY xllm sets for itself; the better figure of each is kept."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")             # as the xllm command sets it for its own process
    monkeypatch.setenv("XLLM_TEST_MARK", "kept")
    mod = _vs_llamacpp()
    fake = tmp_path / "llama-bench"
    fake.write_text('#!/bin/bash\necho "${OMP_WAIT_POLICY:-unset} ${XLLM_TEST_MARK:-}" >> "$(dirname "$0")/seen.txt"\n'
                    'if [ "${OMP_WAIT_POLICY:-}" = PASSIVE ]; then tg=30; pp=100; else tg=20; pp=200; fi\n'
                    'echo "[{\\"model_size\\": 1, \\"model_n_params\\": 2, \\"n_prompt\\": 128, \\"n_gen\\": 0, \\"avg_ts\\": $pp, \\"stddev_ts\\": 1},'
                    ' {\\"model_size\\": 1, \\"model_n_params\\": 2, \\"n_prompt\\": 0, \\"n_gen\\": 64, \\"avg_ts\\": $tg, \\"stddev_ts\\": 2}]"\n')
    fake.chmod(0o755)
    assert mod.llama_bench(tmp_path, "m.gguf", 2, 1)["tg64"] == 20          # by default: OpenMP's default waiting
    r = mod.best_policy(mod.llama_bench, ("tg64", "pp128"), tmp_path, "m.gguf", 2, 1)
    assert (r["tg64"], r["tg64_omp"], r["pp128"], r["pp128_omp"], r["pp128_sd"]) == (30, "passive", 200, "spin", 1)
    assert (tmp_path / "seen.txt").read_text().splitlines() == ["unset kept", "unset kept", "PASSIVE kept"]
    assert set(r["omp_runs"]) == {"spin", "passive"}


def test_vs_llamacpp_writes_one_record(tmp_path):
    "A short run of the script without llama.cpp (its rows skipped, our INT4 only): one record of the schema, our figures in it."
    from xllm.core import default_model_path
    from xllm.bench import SCHEMA, load_results
    try: default_model_path(download=False)
    except FileNotFoundError: pytest.skip("needs the default model in the cache")
    out = tmp_path / "vs.json"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_vs_llamacpp.py"), "--llamacpp", str(tmp_path / "none"), "--reps", "1",
                        "--rounds", "0", "--skip", "ppl,hf,engine,q8_0,int8,f32,bf16", "--work", str(tmp_path), "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "llama.cpp rows are SKIPPED" in p.stderr and "| decode tg64, INT4 vs llama.cpp Q4_1 |" in p.stdout
    [r] = load_results(out)
    assert all(k in r for k in SCHEMA) and (r["name"], r["runner"], r["llamacpp"]) == ("vs-llamacpp", "cpu", {})
    assert list(r["ours"]) == ["INT4 (Q4_1)"] and r["ours"]["INT4 (Q4_1)"]["tg64"] > 0 and r["ours"]["INT4 (Q4_1)"]["pp128"] > 0
