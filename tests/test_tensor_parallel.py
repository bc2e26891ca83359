"""Tensor parallelism launched by torchrun (notebook 13a): two processes on the loopback, `xllm serve --tensor-parallel-size 2`
answering the `openai` client with the tokens of the single-process model; both processes gone when the server is stopped. Plus
`xllm generate -tp 2` spawning its worker, a draft model speculating for a two-rank target. (scripts/gpu_tp_check.py, gpu_check.sh's tensor-parallel section, runs as a dry run
on gloo in tests/test_gpu_check_dryrun.py.)"""
import os, shutil, signal, socket, subprocess, sys, time
from pathlib import Path
import pytest
from two_nodes import run_two_nodes

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun is not installed")
def test_torchrun_serve_two_ranks(tmp_path):
    openai = pytest.importorskip("openai")
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    model = stand_in_model(tmp_path / "m")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = ["torchrun", "--standalone", "--nproc-per-node", "2", "-m", "xllm",      # --standalone: torchrun's rendezvous on a port it binds itself
           "serve", "-m", str(model), "--tensor-parallel-size", "2", "--port", "0"]      # port 0: the server's, named in its start-up line
    from xllm.server import launch
    p, url = launch(cmd, timeout=240, cwd=ROOT, env=env, start_new_session=True)
    try:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)
        r = client.completions.create(model=client.models.list().data[0].id, prompt="Once upon a time", max_tokens=12, temperature=0)
        ref = LLM(model, runner="torch").generate("Once upon a time", SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)[0].outputs[0]
        assert r.choices[0].text == ref.text and r.usage.completion_tokens == len(ref.token_ids)
    finally:
        os.killpg(p.pid, signal.SIGINT)            # as Ctrl-C in the terminal reaches torchrun and both ranks
        try: p.wait(60)
        except subprocess.TimeoutExpired: os.killpg(p.pid, signal.SIGKILL); p.wait(); raise AssertionError("torchrun did not stop")
        for t in p.readers: t.join(10)
    out = "".join(p.out) + "".join(p.err)
    assert "runner tp" in out and "Traceback" not in out.split("Finished server process")[0], out[-3000:]
    with pytest.raises(ProcessLookupError): os.killpg(p.pid, 0)   # no process of the group is left


def test_cli_generate_spawns_two_ranks(tmp_path):
    "`xllm generate --tensor-parallel-size 2` (workers started by xllm itself) prints the single-process greedy text and exits 0; -tp 3 is refused by name."
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    model = stand_in_model(tmp_path / "m")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "xllm", "generate", "The cat", "-m", str(model), "--max-tokens", "16", "--temperature", "0", "--ignore-eos"]
    r = subprocess.run(cmd + ["--tensor-parallel-size", "2"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    ref = LLM(model, runner="torch").generate("The cat", SamplingParams(temperature=0, max_tokens=16, ignore_eos=True), use_tqdm=False)[0].outputs[0]
    assert r.returncode == 0 and r.stdout == ref.text + "\n", r.stderr[-2000:]
    r = subprocess.run(cmd + ["-tp", "3"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode != 0 and "tensor_parallel_size 3 does not divide the model's num_attention_heads" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_speculative_decoding_over_two_ranks(tmp_path):
    """Speculation over a tensor-parallel target: a draft model (here the target's own checkpoint, so every proposal is right) runs
    on rank 0 alone, its proposals verified by both ranks in one multi-token step; greedy tokens equal the single-process engine's,
    and proposals were made and accepted. (N-gram proposals go through the same verification; the stand-in's output copies too
    rarely to count on them.)"""
    import torch
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM, build_engine
    from xllm.sampling import SamplingParams
    torch.set_num_threads(1)
    model = stand_in_model(tmp_path / "m")
    g = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    single = LLM(model, runner="cpu")
    reqs = [(single.tokenizer.encode(p), g) for p in ("Once upon a time", "The cat sat on the mat. The cat sat on the")]
    ref = [r.token_ids for r in build_engine(single).generate(reqs)]
    spec = {"method": "draft", "model": str(model), "num_speculative_tokens": 3, "adaptive": False}   # every proposal verified, whatever the step times say
    tp = LLM(model, tensor_parallel_size=2, speculative=spec)
    try:
        eng = build_engine(tp)
        assert [r.token_ids for r in eng.generate(reqs)] == ref
        assert tp.runner_reason == "tp (2 ranks, each cpu)" and eng.spec_stats.num_accepted > 0, eng.spec_stats
    finally: tp.model.tp_group.shutdown()


def test_rendezvous_under_port_pressure():
    """Issue #39: the rendezvous store binds port 0 itself (`rendezvous_store`), so a group forms however many ports other programs
    hold. Held here: 500 ports on 127.0.0.1 and up to 5,000 on 127.0.0.2 (another loopback address: a port free on 127.0.0.1 may be
    taken there, and torch's store listens on every interface). Picking a free port on 127.0.0.1 and binding it later failed 2 of 4
    starts so (EADDRINUSE); every start must succeed."""
    import resource, torch
    from xllm.core import LlamaConfig
    from xllm.parallel import start_tp
    from xllm.quant import hf_config_dict
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    held = []
    try:
        for host, n in (("127.0.0.1", 500), ("127.0.0.2", 5000)):
            for _ in range(max(0, min(n, soft - len(held) - 200))):
                s = socket.socket()
                try: s.bind((host, 0)); s.listen(1)
                except OSError: s.close(); break         # no 127.0.0.2 here (not Linux): the 127.0.0.1 ports only
                held.append(s)
        cfg = hf_config_dict(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=2))
        for _ in range(4):
            m = start_tp(("random", cfg, 0, torch.float32), 2, threads=1, timeout=30)
            g = m.tp_group
            g.shutdown()
            assert [p.exitcode for p in g.procs] == [0]
    finally:
        for s in held: s.close()


def test_health_names_a_dead_worker():
    """Issue #39: `TPRunner.health()` (what a server's /health asks every second, from its own thread) is None while the group
    works and names the rank within 2 s of a worker's SIGKILL with no traffic at all, in one line without paths or ports."""
    import threading, torch
    from xllm.core import LlamaConfig
    from xllm.kv_pool import PagedKVPool
    from xllm.parallel import start_tp, TPRunner
    from xllm.quant import hf_config_dict
    cfg = hf_config_dict(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                     num_key_value_heads=2))
    m = start_tp(("random", cfg, 0, torch.float32), 2, threads=1, timeout=10)
    try:
        runner = TPRunner(m, PagedKVPool(m.kv_config, 8, 4))
        assert runner.health() is None
        t = time.perf_counter()
        for _ in range(1000): runner.health()
        per_call = (time.perf_counter() - t) / 1000
        seen = []
        def watch():
            end = time.monotonic() + 10
            while time.monotonic() < end:
                if (why := runner.health()) is not None: seen.append((time.monotonic(), why)); return
                time.sleep(0.01)
        w = threading.Thread(target=watch); w.start()
        p = m.tp_group.procs[0]
        os.kill(p.pid, signal.SIGKILL); killed = time.monotonic()
        w.join(15)
        print(f"health(): {per_call * 1e6:.1f} us a call; named {seen[0][0] - killed:.3f} s after the kill")
        assert seen and seen[0][1] == "tensor-parallel rank 1 died (killed by signal 9)" and seen[0][0] - killed < 2
    finally: m.tp_group.shutdown()
    assert "rank 1 died (killed by signal 9)" in runner.health() and not m.tp_group.procs[0].is_alive()


PLAIN_SCRIPT = """
import sys
from xllm.llm import LLM
print("the script's body ran", file=sys.stderr, flush=True)
ids = list(range(5, 45))
tp = LLM({model!r}, tensor_parallel_size=2, runner="torch").logits(ids)
one = LLM({model!r}, runner="torch").logits(ids)
print("REL", ((tp - one).abs().max() / one.abs().max()).item())
"""

def test_plain_script_without_main_guard(tmp_path):
    """A plain script, no `if __name__ == "__main__":` guard, builds `LLM(..., tensor_parallel_size=2)`: its workers are programs of
    their own that never re-import the script (multiprocessing's spawn did, and the script died in its bootstrapping check), so its
    body runs once, and the two-rank logits equal one process's within 1e-5 of max|logit|."""
    from xllm.stand_ins import stand_in_model
    model = stand_in_model(tmp_path / "m")
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_SCRIPT.format(model=str(model)))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.count("the script's body ran") == 1, r.stderr[-3000:]
    rel = float(next(line.split()[1] for line in r.stdout.splitlines() if line.startswith("REL ")))
    assert rel <= 1e-5, rel


def test_two_nodes_on_the_loopback(tmp_path):
    """`xllm generate -tp 4 --nnodes 2`: node 0 binds its rendezvous port as it listens (port 0) and prints it; node 1, given that
    port, runs ranks 2-3 (itself and one worker program) and exits 0 when rank 0 stops; node 0 prints the single-process greedy text.
    A node_rank without node 0's port is refused by name."""
    from xllm.stand_ins import stand_in_model
    model = stand_in_model(tmp_path / "m")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "xllm", "generate", "The cat", "-m", str(model), "--max-tokens", "16", "--temperature", "0", "--ignore-eos",
           "-tp", "4", "--nnodes", "2"]
    rc0, out, n1, err0 = run_two_nodes(cmd, tmp_path, ROOT, env)
    ref = subprocess.run(cmd[:-4], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert rc0 == 0 and n1.returncode == 0, (err0[-2000:], n1.stderr[-2000:])
    assert out == ref.stdout and out.strip(), (out, ref.stdout)
    assert "ranks 2-3 of 4" in n1.stderr and "Traceback" not in n1.stderr + err0, n1.stderr[-2000:]
    r = subprocess.run(cmd + ["--node-rank", "1"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode != 0 and "master_port" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_a_dead_node_is_named_and_stops_the_server(tmp_path):
    """`xllm serve -tp 2 --nnodes 2`: node 0 serves, node 1 runs rank 1. When node 1's process is killed (its machine gone), rank 0
    names rank 1 from its silent heartbeat (no exit code reaches it from another machine): the server logs why and exits 1 within
    HEALTH_SILENCE + a few seconds, with no traffic needed."""
    import re, threading
    openai = pytest.importorskip("openai")
    from xllm.stand_ins import stand_in_model
    model = stand_in_model(tmp_path / "m")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "xllm", "serve", "-m", str(model), "-tp", "2", "--nnodes", "2"]
    n0 = subprocess.Popen(cmd + ["--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: [lines.append(line) for line in n0.stdout], daemon=True); reader.start()
    def wait_for(pattern, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if m := re.search(pattern, "".join(lines)): return m
            if n0.poll() is not None: break
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} from node 0: " + "".join(lines)[-3000:])
    n1 = busy = None
    try:
        port = int(wait_for(r"--master-port (\d+)", 180).group(1))
        busy = socket.create_server(("127.0.0.1", 0))       # node 1 serves no HTTP: an HTTP port another program holds is no concern of its
        n1 = subprocess.Popen(cmd + ["--node-rank", "1", "--master-port", str(port), "--port", str(busy.getsockname()[1])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, start_new_session=True)
        url = wait_for(r"xllm: serving .* on (http://\S+)/v1 ", 240).group(1)
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)
        r = client.completions.create(model=client.models.list().data[0].id, prompt="Once upon a time", max_tokens=4, temperature=0)
        assert r.usage.completion_tokens == 4
        os.killpg(n1.pid, signal.SIGKILL); n1.wait(); killed = time.monotonic()
        n0.wait(60)
        took = time.monotonic() - killed
    finally:
        if busy is not None: busy.close()
        for p in (n0, n1):
            if p is not None and p.poll() is None: os.killpg(p.pid, signal.SIGKILL); p.wait()
    reader.join(10)
    out = "".join(lines)
    assert n0.returncode == 1 and "the engine cannot run any more (tensor-parallel rank 1 stopped answering" in out, out[-3000:]
    assert took < 40, took


def test_bfloat16_over_two_ranks(tmp_path):
    """A bfloat16 model over two ranks: the workers build bfloat16 K/V pools for their torch forward, and so does rank 0 (its
    pool is float32 only where the compiled CPU runner computes a bf16 model alone, `runner.pool_dtype`); greedy tokens equal
    the single-process torch forward's in bfloat16 up to a near tie. The two round differently: each rank's partial o/down
    products are rounded to bfloat16 before they are summed, where one process rounds the whole sum once, and how torch's
    bfloat16 matmul accumulates depends on the CPU (equal tokens on an AVX-512 machine; on an AVX2-only AMD EPYC they part at
    the seventh). So where the tokens part, the single-process logits there must hold the two within a bfloat16 rounding of
    each other (the margin printed), and the tokens before must be equal."""
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    model = stand_in_model(tmp_path / "m")
    g = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    ref_llm = LLM(model, dtype="bfloat16", runner="torch")
    r = ref_llm.generate("Once upon a time", g, use_tqdm=False)[0]
    prompt, want = list(r.prompt_token_ids), r.outputs[0].token_ids
    tp = LLM(model, dtype="bfloat16", tensor_parallel_size=2)
    try:
        got = tp.generate("Once upon a time", g, use_tqdm=False)[0].outputs[0].token_ids
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        if k is not None:
            lg = ref_llm.logits(prompt + want[:k])[-1].float()
            margin, scale = float(lg[want[k]] - lg[got[k]]), float(lg.abs().max())
            print(f"two ranks leave the single process at token {k}: margin {margin:.4f} of logits up to {scale:.2f}")
            assert k >= 2 and 0 <= margin <= scale * 2 ** -7, (k, margin, scale)     # bfloat16 keeps 8 bits: a rounding of the largest logit
        assert len(got) == len(want) == 12
        assert tp.get_engine().pool.dtype is __import__("torch").bfloat16
    finally: tp.model.tp_group.shutdown()


def test_lora_served_over_two_ranks(tmp_path):
    """#44: LoRA adapters on a two-rank group behind the server: one served from the start, one loaded at run time (each rank
    given its part), each answering as the single-process model with the same adapter; unloaded at run time (its slot emptied on
    both ranks, then a 404 for it), an unknown adapter a 404 to unload and a 400 to load from a path holding none."""
    import json, urllib.error, urllib.request, warnings
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM
    from xllm.lora import LoRARequest, random_adapter
    from xllm.sampling import SamplingParams
    from xllm.server import start_server
    model = stand_in_model(tmp_path / "m")
    g = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    one = LLM(model, runner="cpu", enable_lora=True, max_loras=2, max_lora_rank=8)
    paths = {f"a{k}": str(random_adapter(one.config, tmp_path / f"a{k}", r=(8, 4)[k], seed=k, std=1.5)) for k in range(2)}
    want = {name: one.generate("Once upon a time", g, use_tqdm=False, lora_request=None if name == "base" else LoRARequest(name, k + 1, paths[name]))[0].outputs[0].text
            for k, name in enumerate(("a0", "a1", "base"))}
    assert len(set(want.values())) == 3, want                     # each adapter changes the text

    def post(url, body):
        req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r: return r.status, r.read().decode()
        except urllib.error.HTTPError as e: return e.code, e.read().decode()
    tp = LLM(model, tensor_parallel_size=2, enable_lora=True, max_loras=2, max_lora_rank=8, max_cpu_loras=3)
    assert tp.model.lora.max_cpu_loras == 3              # the CPU cache of adapters (12c) made by the group's loader
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with start_server(tp, model_name="base", lora_modules={"a0": paths["a0"]}) as srv:
                complete = lambda m: post(srv.url + "/v1/completions", {"model": m, "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "ignore_eos": True})
                assert post(srv.url + "/v1/load_lora_adapter", {"lora_name": "a1", "lora_path": paths["a1"]})[0] == 200
                for m in ("base", "a0", "a1"):
                    code, text = complete(m)
                    assert code == 200 and json.loads(text)["choices"][0]["text"] == want[m], (m, text)
                assert post(srv.url + "/v1/unload_lora_adapter", {"lora_name": "a0"})[0] == 200
                assert tp.model.lora.adapters.count(None) == 1 and complete("a0")[0] == 404
                assert json.loads(complete("a1")[1])["choices"][0]["text"] == want["a1"]
                assert post(srv.url + "/v1/unload_lora_adapter", {"lora_name": "nope"})[0] == 404
                code, text = post(srv.url + "/v1/load_lora_adapter", {"lora_name": "bad", "lora_path": str(tmp_path / "none")})
                assert code == 400 and "adapter_config.json: not found" in text, text
                assert json.loads(complete("base")[1])["choices"][0]["text"] == want["base"]
    finally: tp.model.tp_group.shutdown()
    assert [p.exitcode for p in tp.model.tp_group.procs] == [0]
