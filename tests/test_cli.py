"The `xllm` command as a user runs it: subprocesses of `python -m xllm` and the `xllm` console script."
import os, shutil, subprocess, sys
from pathlib import Path
import pytest

from xllm.core import default_model_path, find_shared

ROOT = Path(__file__).resolve().parents[1]


def _run(args, stdin=None, timeout=240, console=False):
    exe = shutil.which("xllm") if console else None
    cmd = [exe] if exe else [sys.executable, "-m", "xllm"]
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")   # see test_llm_e2e: threads are slow on a busy box
    return subprocess.run(cmd + list(args), input=stdin, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def _stories():
    shared = find_shared()
    m = shared / "models" if shared else None
    if m is None or not (m / "stories260K.bin").exists() or not (m / "tok512.model").exists(): pytest.skip("shared stories260K absent")
    return ["-m", str(m / "stories260K.bin"), "--tokenizer", str(m / "tok512.model")]


def _default():
    try: return ["-m", str(default_model_path(download=False))]
    except FileNotFoundError: pytest.skip("default model not in the cache")


def _one_error_line(r):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xllm: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_generate_stories_greedy():
    r = _run(["generate", "Once upon a time", *_stories(), "--max-tokens", "40", "--temperature", "0"])
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip()) > 20
    # greedy is deterministic and equals the in-process API's text
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    a = _stories()
    llm = LLM(a[1], tokenizer=a[3])
    assert r.stdout == llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=40))[0].outputs[0].text + "\n"


def test_chat_stories():
    r = _run(["chat", *_stories(), "--max-tokens", "20", "--seed", "1"], stdin="hello\n/reset\nhi\n/exit\n")
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
    (["frobnicate"], "frobnicate"),
])
def test_errors_are_one_line(args, needle):
    assert needle in _one_error_line(_run(args))


def test_corrupt_model_file(tmp_path):
    f = tmp_path / "bad.gguf"
    f.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    assert "bad.gguf" in _one_error_line(_run(["generate", "hi", "-m", str(f)]))


def test_llama2c_without_tokenizer(tmp_path):
    a = _stories()
    shutil.copy(a[1], tmp_path / "stories260K.bin")
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
