"""Issue #40: the `xllm` command as a vLLM or llama.cpp user types it, run as subprocesses on a tiny stand-in model (no downloads).
21_cli checks each name in-process (what it reaches); here the installed command: its exit codes, its one-line errors, a real server."""
import os, shutil, subprocess, sys
from pathlib import Path
import pytest

from xllm import __version__
from xllm.stand_ins import stand_in_model

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")   # see test_llm_e2e: threads are slow on a busy box


def _run(args, stdin=None, timeout=240, env=None):
    exe = shutil.which("xllm")
    cmd = [exe] if exe else [sys.executable, "-m", "xllm"]
    return subprocess.run(cmd + list(args), input=stdin, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env or ENV)


def _one_error_line(r):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xllm: error: "), r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return stand_in_model(tmp_path_factory.mktemp("stand-in"))


def test_version():
    r = _run(["--version"])
    assert (r.returncode, r.stdout) == (0, f"xllm {__version__}\n"), r.stderr


@pytest.mark.parametrize("args, line", [
    (["generate", "hi", "--max-token", "3"], "unrecognized arguments: --max-token 3 (did you mean --max-tokens?)"),
    (["serve", "m.gguf", "--max-model", "64"], "unrecognized arguments: --max-model 64 (did you mean --max-model-len?)"),
    (["generate", "m.gguf", "Once upon a time"], "generate takes one positional, the prompt, and got 2; the model goes in -m"),
    (["serve", "a.gguf", "-m", "b.gguf"], "the model is named twice, as MODEL (a.gguf) and as -m (b.gguf); give it once"),
    (["chat", "a.gguf", "-m", "b.gguf"], "the model is named twice"),
    (["generate", "hi", "-c", "1"], "--max-model-len must be at least 2, got 1"),
    (["chat", "-t", "0"], "--threads must be at least 1, got 0"),
    (["perplexity", "--ctx-size", "2"], "-c/--ctx-size must be at least 4, got 2"),
    (["generate", "hi", "--min-p", "x"], "argument --min-p: invalid float value: 'x'"),
    (["generate", "hi", "--chat-template", "/nonexistent/t.jinja"], "--chat-template /nonexistent/t.jinja: no such file"),
])
def test_conventions_errors_are_one_line(args, line):
    "Every bad value of the new names, and every ambiguity, is one line before any model loads (none of these paths exist)."
    assert line in _one_error_line(_run(args, timeout=60))


def test_help_said_once():
    "The long --quantization and --speculative texts are in `xllm --help`, once; each subcommand's help points there."
    top = _run(["--help"]).stdout
    assert top.count("Q4_K/Q6_K") == 1 and top.count("prompt lookup") == 1
    for cmd in ("generate", "chat", "perplexity", "bench", "serve"):
        h = _run([cmd, "--help"]).stdout
        assert "Q4_K" not in h and "prompt lookup" not in h and "`xllm --help`" in h, cmd


def test_positional_model_and_names(model, tmp_path):
    "`xllm chat MODEL` = `xllm chat -m MODEL`; -c, -t, --min-p, --repetition-penalty, --chat-template parse and run."
    a = _run(["chat", str(model), "--max-tokens", "6", "--temperature", "0"], stdin="hello\n")
    b = _run(["chat", "-m", str(model), "--max-tokens", "6", "--temperature", "0"], stdin="hello\n")
    assert a.returncode == 0 and a.stdout == b.stdout and "context 512" in a.stderr, a.stderr
    c = _run(["chat", str(model), "-c", "128", "-t", "1", "--max-tokens", "6", "--min-p", "0.1", "--repetition-penalty", "1.2"], stdin="hello\n")
    assert c.returncode == 0 and "context 128" in c.stderr, c.stderr
    tpl = tmp_path / "t.jinja"
    tpl.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>")
    r = _run(["generate", "hi", "-m", str(model), "--chat", "--chat-template", str(tpl), "--max-tokens", "3"])
    assert r.returncode == 0 and "carries no chat template" not in r.stderr, r.stderr


@pytest.mark.parametrize("var", ["VLLM_API_KEY", "LLAMA_API_KEY"])
def test_serve_positional_model_and_key_variables(model, var):
    "`xllm serve MODEL` with vLLM's or llama-server's key variable (xllm's own unset): the server asks for that key."
    import json, urllib.request, urllib.error
    from xllm.server import launch
    env = {k: v for k, v in ENV.items() if k not in ("XLLM_API_KEY", "VLLM_API_KEY", "LLAMA_API_KEY")}
    env[var] = "sesame"
    p, url = launch([sys.executable, "-m", "xllm", "serve", str(model), "--port", "0"], timeout=120, cwd=ROOT, env=env)
    try:
        try: urllib.request.urlopen(url + "/v1/models", timeout=30); raise AssertionError("no 401")
        except urllib.error.HTTPError as e: assert e.code == 401
        req = urllib.request.Request(url + "/v1/models", headers={"Authorization": "Bearer sesame"})
        assert json.loads(urllib.request.urlopen(req, timeout=30).read())["data"][0]["id"] == model.name
    finally:
        p.terminate(); p.wait(60)
        for t in p.readers: t.join(10)


def test_chat_line_editing_in_a_terminal(model):
    """`xllm chat` on a terminal (a pty): Up recalls an earlier message from readline's history, which is sent as typed (greedy: the
    same reply as the first time, the history having been reset), and the terminal never shows the raw key (^[[A); a message of several
    lines between two lines of \"\"\" is one turn; Ctrl-D quits with the timing summary."""
    pytest.importorskip("readline")
    import re, select, time
    master, slave = os.openpty()
    env = dict(ENV, TERM="xterm")
    p = subprocess.Popen([sys.executable, "-m", "xllm", "chat", str(model), "--max-tokens", "6", "--temperature", "0"], stdin=slave, stdout=slave,
                         stderr=slave, env=env, cwd=ROOT, close_fds=True, start_new_session=True)
    os.close(slave)
    buf = b""
    def wait_for(done, timeout=120):
        nonlocal buf
        end = time.monotonic() + timeout
        while not done(buf):
            ready, _, _ = select.select([master], [], [], max(0.0, end - time.monotonic()))
            assert ready, f"nothing for {timeout} s; the terminal so far: {buf[-2000:]!r}"
            try: data = os.read(master, 4096)
            except OSError: data = b""                # the child closed the terminal (Linux: EIO)
            if not data: return
            buf += data
    prompts = lambda n: (lambda b: b.count(b"\n> ") >= n)
    try:
        wait_for(prompts(1))
        os.write(master, b"hello\r"); wait_for(prompts(2))
        os.write(master, b"/reset\r"); wait_for(prompts(3))
        os.write(master, b"\x1b[A\x1b[A\r"); wait_for(prompts(4))            # Up, Up: past /reset to hello; Enter
        os.write(master, b'"""\rline one\rline two\r"""\r'); wait_for(prompts(5))
        os.write(master, b"\x04")                                            # Ctrl-D
        wait_for(lambda b: False, timeout=60)                                 # to the end of its output
        assert p.wait(60) == 0
    finally:
        if p.poll() is None: p.kill(); p.wait()
        os.close(master)
    assert b"^[[A" not in buf and b"^[" not in buf, buf
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.decode("utf-8", "replace"))    # the terminal's cursor moves
    greeting, first, reset, again, block, end = text.split("\n> ")
    assert "Up and Down recall earlier messages" in greeting and "(history cleared)" in reset
    echo1, reply1 = first.split("\r\n", 1)
    echo3, reply3 = again.split("\r\n", 1)
    assert echo1 == "hello" and echo3.endswith("hello") and reply3 == reply1 and reply1.strip(), (first, again)
    assert block.count("\r\n... ") == 3 and block.startswith('"""\r\n... line one\r\n... line two\r\n... """\r\n'), block
    summary = [l for l in end.splitlines() if l.startswith("xllm chat: ")]
    assert len(summary) == 1 and re.fullmatch(r"xllm chat: 3 turns, \d+ tokens generated in [\d.]+ s \([\d.]+ tok/s\), first token after [\d.]+ s on average",
                                              summary[0].strip()), end


def _default_model():
    from xllm.core import default_model_path
    try: return default_model_path(download=False)
    except FileNotFoundError: pytest.skip("default model not in the cache")


def test_quantize_says_what_an_already_quantized_source_gives(tmp_path):
    """The default model is a Q4_1 GGUF: `--bits 4` keeps its layers as they are, `--bits 8` rounds their dequantized values again;
    each says so in one line on stderr. `--group 128` does not divide its 576-weight rows: one line, before the model loads."""
    import time
    _default_model()
    r = _run(["quantize", "default", str(tmp_path / "q8"), "--bits", "8"])
    assert r.returncode == 0 and "wrote" in r.stdout, r.stderr
    assert [l for l in r.stderr.splitlines() if l.startswith("xllm:")] == [
        "xllm: note: the source's layers are Q4_1; 8 bits in groups of 32 quantize their dequantized values again: the result is no more "
        "accurate than the source and larger"], r.stderr
    t = time.monotonic()
    line = _one_error_line(_run(["quantize", "default", str(tmp_path / "q128"), "--bits", "4", "--group", "128"]))
    assert line == ("xllm: error: --group 128 does not divide the rows of q_proj/k_proj/v_proj/o_proj/gate_proj/up_proj (576 weights each): "
                    "a row is cut into groups of that many weights, one scale each; this model takes 32 or 64")
    assert not (tmp_path / "q128").exists() and time.monotonic() - t < 30
