"""Pipeline parallelism (notebook 13a, issue #43 item 3): `LLM(path, pipeline_parallel_size=2)` in a plain script (run in a
subprocess) gives the single-process logits within 1e-5 of max|logit| on random tiny configs (MHA and GQA, tied and untied heads),
and so does a pipeline of 2 stages x 2 tensor-parallel ranks; an engine of 32 greedy requests with preemption gives the
single-process tokens; a dead stage rank (the middle of 3) fails the step with an error naming it, no hang, no process left;
`xllm generate --pipeline-parallel-size 2` prints the single-process text, also with its stages on two nodes (the loopback; -tp 2 -pp 2:
four processes)."""
import os, shutil, signal, subprocess, sys, time
from pathlib import Path
import pytest
from two_nodes import run_two_nodes

ROOT = Path(__file__).resolve().parents[1]

CONFIGS = {"MHA, untied": dict(num_attention_heads=4, num_key_value_heads=4, vocab_size=520),
           "GQA, tied": dict(num_attention_heads=8, num_key_value_heads=2, vocab_size=512, tie_word_embeddings=True),
           "GQA, untied": dict(num_attention_heads=8, num_key_value_heads=4, vocab_size=515),
           "MHA, tied": dict(num_attention_heads=4, num_key_value_heads=4, vocab_size=512, tie_word_embeddings=True)}

SCRIPT = """
import sys
from xllm.llm import LLM
ids = list(range(5, 45))
for name, d, tp in {cases!r}:
    pp = LLM(d, pipeline_parallel_size=2, tensor_parallel_size=tp)
    got = pp.logits(ids)
    pp.model.tp_group.shutdown()
    one = LLM(d, runner="torch").logits(ids)
    print("REL", name, tp, ((got - one).abs().max() / one.abs().max()).item(), flush=True)
"""


def _write(tmp_path, name, kw, tokenizer):
    "A random 3-layer model of `kw`'s shape as a HF directory, with the stand-in's tokenizer."
    import json
    from safetensors.torch import save_file
    from xllm.core import LlamaConfig
    from xllm.model import random_llama
    from xllm.quant import hf_config_dict
    m = random_llama(LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=3, max_position_embeddings=256, eos_token_id=[2], **kw), seed=1)
    d = tmp_path / name.replace(", ", "-")
    d.mkdir()
    save_file({k: v.contiguous() for k, v in m.state_dict().items() if not (kw.get("tie_word_embeddings") and k == "lm_head.weight")},
              str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps(hf_config_dict(m.config)))
    shutil.copy(tokenizer, d / "tokenizer.model")
    return d


def test_logits_equal_one_process(tmp_path):
    from xllm.stand_ins import stand_in_model
    tok = stand_in_model(tmp_path / "stand_in") / "tokenizer.model"
    cases = [(name, str(_write(tmp_path, name, kw, tok)), 1) for name, kw in CONFIGS.items()]
    cases.append(("GQA, tied, 2 stages x 2 ranks", cases[1][1], 2))
    script = tmp_path / "plain.py"
    script.write_text(SCRIPT.format(cases=cases))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=400, cwd=tmp_path,
                       env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-3000:]
    rels = [line.split() for line in r.stdout.splitlines() if line.startswith("REL ")]
    assert len(rels) == len(cases), r.stdout
    for *_, rel in rels: assert float(rel) <= 1e-5, r.stdout


def test_engine_with_preemption_same_tokens(tmp_path):
    import torch
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM
    from xllm.engine import Engine
    from xllm.parallel import TPRunner
    from xllm.sampling import SamplingParams
    torch.set_num_threads(1)
    model = stand_in_model(tmp_path / "m")
    rng = torch.Generator().manual_seed(5)
    reqs = [(torch.randint(3, 512, (int(torch.randint(1, 40, (1,), generator=rng)),), generator=rng).tolist(),
             SamplingParams(temperature=0, max_tokens=int(torch.randint(1, 24, (1,), generator=rng)), ignore_eos=True)) for _ in range(32)]
    single = LLM(model, runner="torch")
    want = [r.token_ids for r in Engine(single.model, max_num_seqs=8, block_size=4, num_blocks=40, max_model_len=256, runner="torch").generate(reqs)]
    pp = LLM(model, pipeline_parallel_size=2)
    try:
        eng = Engine(pp.model, max_num_seqs=8, block_size=4, num_blocks=40, max_model_len=256, runner=TPRunner)
        assert [r.token_ids for r in eng.generate(reqs)] == want
        assert eng.scheduler.num_preemptions > 0
    finally: pp.model.tp_group.shutdown()
    assert [p.exitcode for p in pp.model.tp_group.procs] == [0]


def test_dead_middle_stage_is_named(tmp_path):
    "Three stages (the stand-in's 5 layers: 2, 2, 1); the middle stage's process SIGKILLed: the next step fails within the timeout naming it."
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM
    from xllm.parallel import TPError
    from xllm.sampling import SamplingParams
    model = stand_in_model(tmp_path / "m")
    pp = LLM(model, pipeline_parallel_size=3)
    g = pp.model.tp_group
    try:
        greedy = SamplingParams(temperature=0, max_tokens=4)
        pp.generate("Once upon a time", greedy, use_tqdm=False)
        p = g.procs[0]                                       # rank 1: stage 1 of 0-2
        os.kill(p.pid, signal.SIGKILL); p.join()
        t = time.monotonic()
        with pytest.raises(TPError, match=r"rank 1 \(pipeline stage 1 of 0-2\) died"):
            pp.generate("Once upon a time", greedy, use_tqdm=False)
        assert time.monotonic() - t < g.timeout
        assert pp.get_engine().runner.health().startswith("pipeline-parallel rank 1 (pipeline stage 1 of 0-2) died (killed by signal 9)")
    finally: g.shutdown()
    assert not any(p.is_alive() for p in g.procs)


def test_cli_generate_pipeline(tmp_path):
    "`xllm generate --pipeline-parallel-size 2` prints the single-process greedy text and exits 0; -pp 6 is refused by name."
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    model = stand_in_model(tmp_path / "m")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "xllm", "generate", "The cat", "-m", str(model), "--max-tokens", "16", "--temperature", "0", "--ignore-eos"]
    r = subprocess.run(cmd + ["--pipeline-parallel-size", "2"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    ref = LLM(model, runner="torch").generate("The cat", SamplingParams(temperature=0, max_tokens=16, ignore_eos=True), use_tqdm=False)[0].outputs[0]
    assert r.returncode == 0 and r.stdout == ref.text + "\n", r.stderr[-2000:]
    r = subprocess.run(cmd + ["-pp", "6"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode != 0 and "pipeline_parallel_size 6 is more than the model's 5 layers" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("layout,node1", [(["-pp", "2"], "ranks 1-1 of 2"), (["-tp", "2", "-pp", "2"], "ranks 2-3 of 4")])
def test_stages_on_two_nodes(tmp_path, layout, node1):
    """`xllm generate -pp 2 --nnodes 2` (one stage a node) and `-tp 2 -pp 2 --nnodes 2` (a stage of two tensor-parallel ranks a
    node, four processes on the loopback): node 0 prints the single-process greedy text, node 1 exits 0 when rank 0 stops."""
    from xllm.stand_ins import stand_in_model
    model = stand_in_model(tmp_path / "m")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    base = [sys.executable, "-m", "xllm", "generate", "The cat", "-m", str(model), "--max-tokens", "16", "--temperature", "0", "--ignore-eos"]
    cmd = base + layout + ["--nnodes", "2"]
    rc0, out, n1, err0 = run_two_nodes(cmd, tmp_path, ROOT, env)
    ref = subprocess.run(base, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert rc0 == 0 and n1.returncode == 0, (err0[-2000:], n1.stderr[-2000:])
    assert out == ref.stdout and out.strip(), (out, ref.stdout)
    assert node1 in n1.stderr and "Traceback" not in n1.stderr + err0, n1.stderr[-2000:]


def test_default_model_in_two_stages():
    """The default model (a Q4_1 GGUF) in two stages, each dequantizing only its own layers: `xllm generate -pp 2` prints the text
    of the single-process float model (`--quantization none`)."""
    from xllm.core import default_model_path
    try: default_model_path(download=False)
    except Exception as e: pytest.skip(f"default model not available: {e}")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "xllm", "generate", "The capital of France is", "--max-tokens", "12", "--temperature", "0"]
    pp = subprocess.run(cmd + ["-pp", "2"], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    one = subprocess.run(cmd + ["--quantization", "none"], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert pp.returncode == 0 and one.returncode == 0, pp.stderr[-2000:] + one.stderr[-2000:]
    assert pp.stdout == one.stdout and pp.stdout.strip(), (pp.stdout, one.stdout)
