"The README as a newcomer meets it: generated from nbs/index.ipynb, and its commands run as written, from any directory."
import os, re, shlex, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _commands():
    "Every `xllm ...` / `python -m xllm ...` line of the README's sh blocks, as argv after `xllm` (comments dropped)."
    out = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]): words = words[1:]    # VAR=value before the command
                if words[:3] == ["python", "-m", "xllm"]: words = words[2:]
                if words[:1] == ["xllm"]: out.append(words[1:])
    return out


def test_readme_is_the_notebook():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_readme.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_readme_links_resolve():
    "Relative links in README.md point at files of the repository (README sits at the root; the notebooks in nbs/)."
    links = [l for l in re.findall(r"\]\(([^)#]+)\)", README) if not re.match(r"https?:", l)]
    assert links and all((ROOT / l).exists() for l in links), [l for l in links if not (ROOT / l).exists()]


def test_readme_commands_parse():
    "Every command line the README shows is accepted by the CLI's parser as written (no stale flag or placeholder subcommand)."
    from xllm.cli import build_parser
    cmds = _commands()
    assert {c[0] for c in cmds if c} >= {"chat", "generate", "quantize", "perplexity", "serve", "bench"}, cmds
    for argv in cmds: build_parser().parse_args(argv)


def _run_elsewhere(argv, tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "xllm", *argv], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)


def test_readme_bench_and_perplexity_run_from_anywhere(tmp_path):
    """The README's `bench --workload` and `perplexity` lines, run in an empty directory on the default model (the workloads and
    the sample text ship inside the package); bench with fewer requests and tokens than the README's, to stay short."""
    from xllm.core import default_model_path
    try: default_model_path(download=False)
    except FileNotFoundError: pytest.skip("the default model is not in the cache (.ci/run fetches it)")
    bench = next(c for c in _commands() if c[0] == "bench")
    assert bench[:3] == ["bench", "--workload", "prompts"], bench
    r = _run_elsewhere(["bench", "--workload", "prompts", "--batch", "2", "--max-tokens", "2", "--ignore-eos"], tmp_path)
    assert r.returncode == 0 and "engine: 2 requests" in r.stdout, r.stderr[-2000:]
    dec = next(c for c in _commands() if c[:2] == ["bench", "decode"])          # another suite of the same entry point, shorter
    r = _run_elsewhere([*dec[:2], "--max-tokens", "4", "--reps", "1"], tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("decode tg4: ") and "tok_s" in r.stdout, (r.stdout, r.stderr[-2000:])
    ppl = next(c for c in _commands() if c[0] == "perplexity")
    r = _run_elsewhere(ppl, tmp_path)
    assert r.returncode == 0 and re.match(r"perplexity \d+\.\d+ \(3 windows of 256 tokens", r.stdout), (r.stdout, r.stderr[-2000:])
