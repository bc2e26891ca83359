"""Models named by Hugging Face id (issue #40): `LLM("owner/name")` and `xllm generate -m owner/name` load the copy in the
Hugging Face cache, laid out here as `huggingface_hub` lays it out (blobs, a snapshot of links, refs/main), with
HF_HUB_OFFLINE=1 and no network; an id the cache lacks is one line naming it and where it was looked for; a local path of the
same name wins over the id."""
import hashlib, os, subprocess, sys
from pathlib import Path

import pytest

from xllm.core import default_model_path, resolve_model

COMMIT = "1234567890abcdef" * 2 + "12345678"


def put_in_hub(cache: Path, repo: str, files: dict[str, Path], commit: str = COMMIT) -> Path:
    "Copy `files` ({path in the repository: local file}) into the hub cache `cache` as huggingface_hub does; the snapshot's path."
    d = cache / ("models--" + repo.replace("/", "--"))
    for name, src in files.items():
        blob = d / "blobs" / hashlib.sha256(str(src).encode()).hexdigest()   # (the real name is the file's hash: any name does here)
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists(): blob.symlink_to(Path(src).resolve())
        link = d / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (d / "refs").mkdir(exist_ok=True)
    (d / "refs" / "main").write_text(commit)
    return d / "snapshots" / commit


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    "HF_HOME with the stand-in model as `owner/name`; (HF_HOME, the model's local directory, its snapshot)."
    from xllm.stand_ins import stand_in_model
    root = tmp_path_factory.mktemp("hub")
    model = stand_in_model(root / "stand-in")
    snap = put_in_hub(root / "hf" / "hub", "owner/name", {p.name: p for p in model.iterdir()})
    return root / "hf", model, snap


@pytest.fixture
def offline(hub, monkeypatch):
    home, _, _ = hub
    for v in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"): monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hub


def _greedy(llm, n=6):
    from xllm.sampling import SamplingParams
    return llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=n, ignore_eos=True), use_tqdm=False)[0].outputs[0].token_ids


def test_llm_loads_an_id_from_the_cache(offline):
    from xllm.llm import LLM
    _, model, snap = offline
    by_id, by_path = LLM("owner/name", seed=0), LLM(model, seed=0)
    assert by_id.model_path == snap and by_id.model_name == "owner/name" and repr(by_id).startswith("LLM(owner/name: hf")
    assert _greedy(by_id) == _greedy(by_path)


def test_missing_id_offline_is_one_line(offline, hub):
    from xllm.llm import LLM
    home = hub[0]
    with pytest.raises(FileNotFoundError) as e: LLM("owner/missing")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("model not found: owner/missing is not a local path"), msg
    assert str(home / "hub" / "models--owner--missing") in msg and "HF_HUB_OFFLINE=1 forbids downloading it" in msg, msg


def test_missing_id_without_huggingface_hub(offline, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)          # `import huggingface_hub` fails
    with pytest.raises(FileNotFoundError, match=r"owner/missing .*downloading it needs huggingface_hub: pip install 'xllm\[hub\]'"):
        resolve_model("owner/missing")
    assert resolve_model("owner/name") == offline[2]                   # a cached id needs no huggingface_hub


def test_local_path_wins_over_the_id(offline, tmp_path, monkeypatch):
    from xllm.llm import LLM
    from xllm.stand_ins import stand_in_model
    stand_in_model(tmp_path / "owner" / "name", seed=1)
    monkeypatch.chdir(tmp_path)
    local = LLM("owner/name", seed=0)
    assert local.model_path == Path("owner/name") and local.model_id is None
    assert _greedy(local) != _greedy(LLM(offline[1], seed=0))          # another model (seed 1) than the cached one


def test_gguf_by_quant_tag(offline, hub, tmp_path):
    "A GGUF repository in the cache, its file chosen by `:QUANT` (the default model's Q4_1 file, when it is cached here)."
    try: gguf = default_model_path(download=False)
    except FileNotFoundError: pytest.skip("default model not in the cache")
    from xllm.llm import LLM
    (readme := tmp_path / "README.md").write_text("# a model card")
    snap = put_in_hub(hub[0] / "hub", "someone/SmolLM2-GGUF", {"SmolLM2-135M-Instruct.Q4_1.gguf": gguf, "README.md": readme})
    llm = LLM("someone/SmolLM2-GGUF:q4_1", kv_cache_memory=2**24)
    assert llm.model_path == snap / "SmolLM2-135M-Instruct.Q4_1.gguf" and llm.checkpoint.format == "gguf"
    assert resolve_model("someone/SmolLM2-GGUF") == llm.model_path    # the one GGUF file, without a tag


def _cli(args, home, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE")}
    env.update(HF_HOME=str(home), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "xllm", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_cli_generate_with_an_id(hub, tmp_path):
    home = hub[0]
    r = _cli(["generate", "hi", "-m", "owner/name", "--max-tokens", "2", "--temperature", "0"], home, tmp_path)
    assert r.returncode == 0 and r.stdout.strip(), (r.returncode, r.stdout, r.stderr[-2000:])
    r = _cli(["generate", "hi", "-m", "owner/missing", "--max-tokens", "2"], home, tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("xllm: error: model not found: owner/missing is not a local path"), r.stderr
    assert str(home / "hub" / "models--owner--missing") in lines[0]
