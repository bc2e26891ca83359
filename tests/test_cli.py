"The `xllm` command as a user runs it: subprocesses of `python -m xllm` and the `xllm` console script."
import os, shutil, subprocess, sys
from pathlib import Path
import pytest

from xllm.stand_ins import stand_in_model
from xllm.core import default_model_path, find_shared

ROOT = Path(__file__).resolve().parents[1]


def _run(args, stdin=None, timeout=240, console=False):
    exe = shutil.which("xllm") if console else None
    cmd = [exe] if exe else [sys.executable, "-m", "xllm"]
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")   # see test_llm_e2e: threads are slow on a busy box
    return subprocess.run(cmd + list(args), input=stdin, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def stories(tmp_path_factory):
    "CLI model arguments: stories260K (llama2.c) and its tokenizer from the shared data, else its stand-in of the same shape (an HF directory)."
    shared = find_shared()
    m = shared / "models" if shared else None
    if m is not None and (m / "stories260K.bin").exists() and (m / "tok512.model").exists():
        return ["-m", str(m / "stories260K.bin"), "--tokenizer", str(m / "tok512.model")]
    return ["-m", str(stand_in_model(tmp_path_factory.mktemp("stand-in")))]


def _default():
    try: return ["-m", str(default_model_path(download=False))]
    except FileNotFoundError: pytest.skip("default model not in the cache")


def _one_error_line(r):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xllm: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_generate_stories_greedy(stories):
    r = _run(["generate", "Once upon a time", *stories, "--max-tokens", "40", "--temperature", "0"])
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip()) > 20
    # greedy is deterministic and equals the in-process API's text
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    llm = LLM(stories[1], tokenizer=stories[3] if len(stories) > 2 else None)
    assert r.stdout == llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=40))[0].outputs[0].text + "\n"


def test_chat_stories(stories):
    r = _run(["chat", *stories, "--max-tokens", "20", "--seed", "1"], stdin="hello\n/reset\nhi\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert "(history cleared)" in r.stdout
    replies = [l for l in r.stdout.split("> ") if l.strip() and "history cleared" not in l]
    assert len(replies) >= 2, r.stdout


def test_generate_default_model():
    r = _run(["generate", "The capital of France is", *_default(), "--max-tokens", "8", "--temperature", "0"], console=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()


def test_chat_default_model_eof():
    "EOF (no /exit) ends the session cleanly too."
    r = _run(["chat", *_default(), "--max-tokens", "12", "--temperature", "0", "--system", "Be brief."], stdin="hello\n/reset\nhi\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("> ") >= 3 and len(r.stdout.replace("> ", "").strip()) > 0


@pytest.mark.parametrize("args, needle", [
    (["generate", "hi", "-m", "/nonexistent/model.gguf"], "/nonexistent/model.gguf"),
    (["generate", "hi", "--temperature", "-1", "-m", "x.gguf"], "temperature"),
    (["generate", "hi", "--top-p", "2", "-m", "x.gguf"], "top_p"),
    (["generate", "hi", "--max-tokens", "0"], "max-tokens"),
    (["generate", "hi", "--top-k", "abc"], "--top-k"),
    (["generate", "hi", "--bogus"], "--bogus"),
    (["bench", "--random-weights", "smollm2-135m", "--workload", "hello", "--max-num-seqs", "8", "--max-num-batched-tokens", "4"], "must be at least max_num_seqs (8)"),
    (["bench", "--random-weights", "smollm2-135m", "--workload", "hello", "--max-num-batched-tokens", "0"], "max_num_batched_tokens"),
    (["bench", "--random-weights", "smollm2-135m", "--workload", "hello", "--quantization", "gguf"], "needs a GGUF file"),
    (["frobnicate"], "frobnicate"),
])
def test_errors_are_one_line(args, needle):
    assert needle in _one_error_line(_run(args))


def test_corrupt_model_file(tmp_path):
    f = tmp_path / "bad.gguf"
    f.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    assert "bad.gguf" in _one_error_line(_run(["generate", "hi", "-m", str(f)]))


def test_llama2c_without_tokenizer(stories, tmp_path):
    "A llama2.c checkpoint alone: the error names the missing tokenizer (stories260K, else a legacy file of its shape, all zeros)."
    if stories[1].endswith(".bin"): shutil.copy(stories[1], tmp_path / "stories260K.bin")
    else:                                   # header: dim, hidden, layers, heads, K/V heads, vocab (> 0: shared head), seq_len
        import struct
        dim, hid, L, H, KV, V, T = 64, 172, 5, 8, 4, 512, 512
        kv = dim * KV // H
        n = V * dim + L * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * dim * hid) + dim + T * dim // H
        (tmp_path / "stories260K.bin").write_bytes(struct.pack("7i", dim, hid, L, H, KV, V, T) + bytes(4 * n))
    assert "tokenizer" in _one_error_line(_run(["generate", "hi", "-m", str(tmp_path / "stories260K.bin")]))


def test_chat_ctrl_c_stops_reply_only():
    "A real SIGINT while a reply streams stops that reply; the chat goes on (next question answered) and /exit exits 0."
    import signal, threading
    a = _default()
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-m", "xllm", "chat", *a, "--max-tokens", "100", "--temperature", "0"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    killer = threading.Timer(180, p.kill); killer.start()
    try:
        p.stdin.write("Write a long story about a dragon.\n"); p.stdin.flush()
        got = ""
        while len(got) < 40 and p.poll() is None: got += p.stdout.read(1)
        p.send_signal(signal.SIGINT)
        p.stdin.write("hi\n/exit\n"); p.stdin.flush()
        out, _ = p.communicate(timeout=180)
    finally: killer.cancel()
    out = got + out
    assert p.returncode == 0, out[-500:]
    assert " [stopped]\n> " in out and out.count("> ") == 3, out[-500:]
    assert out.split("> ")[2].strip()   # the next question got an answer


# ---- quantize / perplexity / bench, on a tiny random model built here (no downloads) and on stories260K when shared is there

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    "A random 2-layer LlamaForCausalLM (transformers) + a SentencePiece tokenizer trained here; returns its directory."
    import io, torch, sentencepiece as spm
    from transformers import LlamaConfig as HFLlamaConfig, LlamaForCausalLM
    d = tmp_path_factory.mktemp("tiny")
    corpus = ["Once upon a time there was a little girl named Lily.", "She liked to play in the park with her big red ball.",
              "Tom said: hello! How are you today? I am fine, thanks."] * 40
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=buf, vocab_size=300, model_type="bpe", byte_fallback=True,
        character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2, num_threads=1)
    torch.manual_seed(0)
    hf = LlamaForCausalLM(HFLlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=2, max_position_embeddings=512, bos_token_id=1, eos_token_id=2))
    with torch.no_grad():
        for n, p in hf.named_parameters():
            if p.dim() == 2: p.normal_(0, 1.0 if "embed" in n else p.shape[1] ** -0.5)
    hf.save_pretrained(d)
    (d / "tokenizer.model").write_bytes(buf.getvalue())
    (d / "text.txt").write_text(" ".join(corpus[:15]))
    return d


@pytest.mark.parametrize("bits", [8, 4])
def test_quantize_round_trip(tiny, tmp_path, bits):
    "`xllm quantize` writes a directory; `xllm generate -m DIR` loads it and prints the API's greedy text on it."
    from xllm import quant
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    out = tmp_path / f"q{bits}"
    r = _run(["quantize", str(tiny), str(out), "--bits", str(bits)])
    assert r.returncode == 0 and "wrote" in r.stdout, r.stderr
    assert quant.is_quantized_dir(out)
    r = _run(["generate", "Once upon a time", "-m", str(out), "--max-tokens", "10", "--temperature", "0"])
    assert r.returncode == 0, r.stderr
    llm = LLM(out)
    assert any(isinstance(m, (quant.Int8Linear, quant.Int4Linear)) for m in llm.model.modules())
    assert r.stdout == llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=10))[0].outputs[0].text + "\n"


def test_perplexity_equals_api(tiny):
    import math
    from xllm.evaluate import perplexity
    from xllm.llm import LLM
    r = _run(["perplexity", "-m", str(tiny), "--file", str(tiny / "text.txt"), "--ctx", "32"])
    assert r.returncode == 0, r.stderr
    ppl = float(r.stdout.split()[1])
    llm = LLM(tiny)
    ref = perplexity(llm.logits, llm.tokenizer.encode((tiny / "text.txt").read_text()), 32, bos_id=llm.tokenizer.bos_id, progress=False)
    assert math.isfinite(ppl) and f"{ppl:.6f}" == f"{ref:.6f}"


@pytest.mark.parametrize("args, needle", [(["--bits", "3"], "--bits"), (["--bits", "4", "--group", "48"], "--group")])
def test_quantize_bad_args(tiny, tmp_path, args, needle):
    assert needle in _one_error_line(_run(["quantize", str(tiny), str(tmp_path / "q"), *args]))
    assert not (tmp_path / "q").exists()


def test_quantize_never_overwrites(tiny, tmp_path):
    "Quantizing into the input directory, or into a directory with files in it, is refused in one line before anything is written."
    import hashlib
    digest = lambda d: {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in d.iterdir()}
    before = digest(tiny)
    assert "is the input directory" in _one_error_line(_run(["quantize", str(tiny), str(tiny), "--bits", "4"]))
    assert digest(tiny) == before
    busy = tmp_path / "busy"; busy.mkdir(); (busy / "notes.txt").write_text("mine")
    assert "is not empty" in _one_error_line(_run(["quantize", str(tiny), str(busy)]))
    assert [f.name for f in busy.iterdir()] == ["notes.txt"]
    assert _run(["quantize", str(tiny), str(tmp_path / "q")]).returncode == 0
    assert "already quantized" in _one_error_line(_run(["quantize", str(tmp_path / "q"), str(tmp_path / "q2")]))


def test_bench_json(tiny, tmp_path):
    "`xllm bench` through the engine and --sequential: same token counts, every field reported."
    import json
    from xllm.tokenizer import Tokenizer
    m = ["-m", str(tiny)]
    tok = Tokenizer.from_file(tiny)
    prompts = (ROOT / "bench" / "prompts.txt").read_text().splitlines()[:4]
    n_prompt = sum(len(tok.encode(p, add_bos=tok.add_bos_token)) for p in prompts)
    for extra in ([], ["--sequential"]):
        js = tmp_path / "b.json"
        r = _run(["bench", "--file", str(ROOT / "bench" / "prompts.txt"), *m, "--batch", "4", "--max-tokens", "4", "--ignore-eos", "--json", str(js),
                  "--max-num-batched-tokens", "40", *extra])
        assert r.returncode == 0, r.stderr
        d = json.loads(js.read_text())
        assert d["max_num_batched_tokens"] == 40
        assert d["mode"] == ("sequential" if extra else "engine")
        assert (d["requests"], d["prompt_tokens"], d["output_tokens"]) == (4, n_prompt, 16)
        for k in ("prefill_tok_s", "decode_tok_s", "output_tok_s", "ttft_p50_s", "ttft_p95_s", "peak_rss_mb", "wall_s"): assert d[k] > 0, k
        assert d["ttft_p50_s"] <= d["ttft_p95_s"]
        assert 1 <= d["peak_kv_blocks"] <= d["kv_blocks_total"] and d["runner"] in ("cpu", "torch")   # both modes: one engine
        assert "tok/s" in r.stdout


def test_bench_random_weights_quantized(tmp_path):
    "`xllm bench --random-weights ... --quantization int4`: the random layers quantized (a GPU benchmark of the INT4 kernels needs no download)."
    import json
    js = tmp_path / "b.json"
    r = _run(["bench", "--random-weights", "smollm2-135m", "--workload", "hello", "--batch", "2", "--max-tokens", "2", "--ignore-eos",
              "--quantization", "int4", "--json", str(js)])
    assert r.returncode == 0, r.stderr
    d = json.loads(js.read_text())
    assert d["quantization"] == "int4" and d["output_tokens"] == 4


def test_conflicts_and_bad_files_are_one_line(tiny, tmp_path):
    "Options that cannot apply, files that are not what they claim, and places the command cannot write or listen: one line, rc 2, before any work."
    import socket
    m = ["-m", str(tiny)]
    assert "--system needs --chat" in _one_error_line(_run(["generate", "hi", *m, "--system", "be brief"]))
    assert "invalid choice: 'fp64'" in _one_error_line(_run(["generate", "hi", *m, "--dtype", "fp64"]))
    assert "use 'cpu', 'cuda' or 'cuda:N'" in _one_error_line(_run(["generate", "hi", *m, "--device", "tpu"]))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait ".encode("latin-1") * 40)
    assert "latin1.txt: not UTF-8 text" in _one_error_line(_run(["perplexity", *m, "--file", str(tmp_path / "latin1.txt")]))
    (tmp_path / "w.safetensors").write_bytes(os.urandom(1000))
    assert "w.safetensors: a .safetensors file is read with the config.json" in _one_error_line(_run(["generate", "hi", "-m", str(tmp_path / "w.safetensors")]))
    assert "the directory /nonexistent-xllm does not exist" in _one_error_line(
        _run(["bench", *m, "--file", str(ROOT / "bench" / "hello.txt"), "--json", "/nonexistent-xllm/x.json"]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); s.listen()
        r = _run(["serve", *m, "--port", str(s.getsockname()[1])], timeout=60)
    assert "cannot listen on 127.0.0.1" in _one_error_line(r) and "serving" not in r.stdout


def test_broken_pipe_is_quiet(tiny):
    "`xllm generate ... | head -c 5`: the reader goes away; the command stops without an error message (rc 141, like `yes | head`)."
    cmd = [sys.executable, "-m", "xllm", "generate", "Once upon a time", "-m", str(tiny), "--max-tokens", "200", "--ignore-eos", "--temperature", "0"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    p.stdout.read(5); p.stdout.close()
    err = p.stderr.read().decode(); p.wait(120)
    assert p.returncode == 141 and "error" not in err and "Traceback" not in err, (p.returncode, err)


def test_ignore_eos_and_template_note(tiny):
    "--ignore-eos gives exactly --max-tokens tokens; a model without a chat template says which built-in format stands in."
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    r = _run(["generate", "Once", "-m", str(tiny), "--max-tokens", "30", "--ignore-eos", "--temperature", "0"])
    ref = LLM(tiny).generate("Once", SamplingParams(temperature=0, max_tokens=30, ignore_eos=True), use_tqdm=False)[0].outputs[0]
    assert r.returncode == 0 and r.stdout == ref.text + "\n" and len(ref.token_ids) == 30, r.stderr
    r = _run(["generate", "hi", "-m", str(tiny), "--chat", "--max-tokens", "3"])
    assert r.returncode == 0 and "carries no chat template; using the built-in llama2 format" in r.stderr, r.stderr


def test_serve_served_model_name(tiny):
    "`xllm serve --served-model-name NAME`: /v1/models lists NAME, responses carry it, /v1/models/NAME answers and another id is a 404."
    import json, urllib.request, urllib.error
    from xllm.server import launch
    p, url = launch([sys.executable, "-m", "xllm", "serve", "-m", str(tiny), "--port", "0", "--served-model-name", "my-model"], timeout=120, cwd=ROOT)
    try:
        models = json.loads(urllib.request.urlopen(url + "/v1/models", timeout=30).read())
        assert [m["id"] for m in models["data"]] == ["my-model"]
        assert json.loads(urllib.request.urlopen(url + "/v1/models/my-model", timeout=5).read())["id"] == "my-model"
        try: urllib.request.urlopen(url + "/v1/models/other", timeout=5); raise AssertionError("no 404")
        except urllib.error.HTTPError as e: assert e.code == 404 and json.loads(e.read())["error"]["code"] == "model_not_found"
        req = urllib.request.Request(url + "/v1/completions", json.dumps({"prompt": "Once", "max_tokens": 2}).encode(), {"Content-Type": "application/json"})
        assert json.loads(urllib.request.urlopen(req, timeout=60).read())["model"] == "my-model"
    finally:
        p.terminate(); p.wait(60)
        for t in p.readers: t.join(10)
    assert "as 'my-model'" in "".join(p.out)


def _error_after_progress(r):
    "The one `xllm: error:` line of a run that failed after its progress bar (which the terminal overwrites) was drawn."
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    said = [l for l in r.stderr.splitlines() if l.strip() and "quantizing to" not in l]
    assert len(said) == 1 and said[0].startswith("xllm: error: "), r.stderr
    return said[0]


def test_quantize_write_failures_are_one_line(tiny, tmp_path):
    """Issue #39: a write that fails is one line naming the output and the cause, exit 2, nothing left behind. Under a file-size
    limit (RLIMIT_FSIZE: the kernel refuses the safetensors write with EFBIG; Python ignores SIGXFSZ) and with a full disk as
    safetensors reports it (its save replaced in the process: a real ENOSPC needs a full filesystem)."""
    import resource
    out = tmp_path / "q"
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "xllm", "quantize", str(tiny), str(out)], capture_output=True, text=True, timeout=240, cwd=ROOT,
                       env=env, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384)))
    assert _error_after_progress(r) == f"xllm: error: cannot write {out}: File too large (nothing was left behind)"
    assert list(tmp_path.iterdir()) == []
    full = ("import sys, safetensors.torch as st\nfrom safetensors import SafetensorError\n"
            "def full(tensors, path, *a, **k): raise SafetensorError(f'Error while serializing: I/O error: No space left on device (os error 28) at path \"{path}.tmp\"')\n"
            f"st.save_file = full\nfrom xllm.cli import main\nsys.exit(main(['quantize', {str(tiny)!r}, {str(out)!r}]))\n")
    r = subprocess.run([sys.executable, "-c", full], capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    assert _error_after_progress(r) == f"xllm: error: cannot write {out}: No space left on device (nothing was left behind)"
    assert list(tmp_path.iterdir()) == []


def test_quantize_killed_run_is_cleaned_up(tiny, tmp_path):
    """Issue #39: a quantize SIGKILLed while it writes leaves its hidden temporary directory (nothing of it runs after); the next run
    to the same output removes it, saying so in one line on stderr, and writes the output. A temporary directory whose writer still
    runs (here: this test's process) is left alone, silently."""
    import json, socket, time
    out, ready = tmp_path / "q", tmp_path / "ready"
    slow = ("import sys, time, pathlib, safetensors.torch as st\nreal = st.save_file\n"
            f"def slow(*a, **k): real(*a, **k); pathlib.Path({str(ready)!r}).write_text('written'); time.sleep(600)\n"
            f"st.save_file = slow\nfrom xllm.cli import main\nsys.exit(main(['quantize', {str(tiny)!r}, {str(out)!r}]))\n")
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-c", slow], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 240
        while not ready.exists():
            assert p.poll() is None and time.monotonic() < end, p.stderr.read().decode()[-2000:] if p.poll() is not None else "no write in 240 s"
            time.sleep(0.1)
        left = [d for d in tmp_path.iterdir() if d.name.startswith(".q.")]
        assert len(left) == 1 and (left[0] / "model.safetensors").stat().st_size > 0
        assert json.loads((left[0] / ".xllm-writer.json").read_text())["pid"] == p.pid
    finally:
        p.kill(); p.wait()
    assert left[0].is_dir()                                   # SIGKILL: the directory stays
    running = tmp_path / ".q.running1"; running.mkdir()      # a writer that runs: kept
    (running / ".xllm-writer.json").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    r = _run(["quantize", str(tiny), str(out)])
    assert r.returncode == 0, r.stderr
    notes = [l for l in r.stderr.splitlines() if l.startswith("xllm:")]
    assert notes == [f"xllm: note: removed {left[0]}, left by a write of {out} that was killed (pid {p.pid})"], r.stderr
    assert sorted(d.name for d in tmp_path.iterdir()) == [".q.running1", "q", "ready"]
    assert ".xllm-writer.json" not in os.listdir(out)


def _one_token_pair(tok):
    "Two texts that are one token each for `tok` (a reranker's yes / no)."
    out = [s for t in range(3, tok.vocab_size) if (s := tok.decode([t])).strip() and tok.encode(s, add_bos=False) == [t]][:2]
    if len(out) < 2: pytest.skip("no one-token texts in this tokenizer")
    return out


def test_serve_task_score_reranker(tiny, tmp_path):
    """`xllm serve --task score --reranker FILE` (issue #45): /v1/rerank scores as `LLM.score` with the same settings, generation is a 400
    naming the task; `--task score` with nothing to score with and a reranker token that is not one token are one-line errors."""
    import json, urllib.request, urllib.error
    from xllm.llm import LLM
    from xllm.server import launch
    yes, no = _one_token_pair(LLM(tiny).tokenizer)
    rr = {"template": "Query: {query} Document: {document} Relevant:", "yes": yes, "no": no}
    (tmp_path / "rr.json").write_text(json.dumps(rr))
    q, docs = "a girl", ["Lily liked the park", "hello how are you", "a big red ball"]
    ref = LLM(tiny, reranker=rr).score(q, docs)
    p, url = launch([sys.executable, "-m", "xllm", "serve", "-m", str(tiny), "--port", "0", "--task", "score", "--reranker", str(tmp_path / "rr.json")],
                    timeout=120, cwd=ROOT)
    def post(path, body):
        req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r: return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e: return e.code, json.loads(e.read())
    try:
        s, b = post("/v1/rerank", {"query": q, "documents": docs})
        assert s == 200 and sorted((r["index"], round(r["relevance_score"], 4)) for r in b["results"]) == [(i, round(x, 4)) for i, x in enumerate(ref)], (b, ref)
        s, b = post("/v1/completions", {"prompt": "Once", "max_tokens": 2})
        assert s == 400 and "task='score'" in b["error"]["message"], b
    finally:
        p.terminate(); p.wait(60)
        for t in p.readers: t.join(10)
    m = ["-m", str(tiny), "--port", "0"]
    assert "--task score: the model has no classification head" in _one_error_line(_run(["serve", *m, "--task", "score"], timeout=120))
    bad = json.dumps({**rr, "yes": "Once upon a time"})
    assert "--reranker: reranker.yes: 'Once upon a time' is" in _one_error_line(_run(["serve", *m, "--reranker", bad], timeout=120))
    assert "argument --reranker: reranker.template: expected a text with {query} and {document}" in _one_error_line(
        _run(["serve", *m, "--reranker", '{"template": "{query}", "yes": "a"}'], timeout=60))
