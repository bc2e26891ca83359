"LoRA adapters served (#44): the official `openai` client against a stand-in model with two adapters and the base; load/unload at run time."
import json, os, subprocess, sys, urllib.error, urllib.request, warnings
from pathlib import Path

import pytest
from openai import NotFoundError, OpenAI

from xllm.llm import LLM
from xllm.lora import random_adapter
from xllm.sampling import SamplingParams
from xllm.server import launch, start_server
from xllm.stand_ins import stand_in_model

PROMPT, MSGS = "Once upon a time", [{"role": "user", "content": "Tell me a story."}]
GREEDY = SamplingParams(temperature=0, max_tokens=12)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    "A stand-in LLM with LoRA on, three random adapters (two served from the start), and the running server."
    d = tmp_path_factory.mktemp("lora")
    llm = LLM(stand_in_model(d / "m"), enable_lora=True, max_loras=2, max_lora_rank=16)
    paths = {f"a{k}": str(random_adapter(llm.config, d / f"a{k}", r=(8, 16, 4)[k], seed=k, std=1.5)) for k in range(3)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # the stand-in has no chat template: the built-in one, with a warning
        with start_server(llm, model_name="base", api_key="k", lora_modules={"a0": paths["a0"], "a1": paths["a1"]}) as srv:
            yield llm, srv, paths | {"model": str(d / "m")}


def _post(url: str, body: dict, key: str | None = "k") -> tuple[int, str]:
    "POST `body` as JSON; (status, response text)."
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r: return r.status, r.read().decode()
    except urllib.error.HTTPError as e: return e.code, e.read().decode()


def _want(llm, srv, model, chat=False):
    "What `LLM.generate` / `LLM.chat` answers with the adapter the server serves as `model` (None: the base model)."
    lr = srv.app.state.xllm.loras.get(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = llm.chat(MSGS, GREEDY, use_tqdm=False, lora_request=lr) if chat else llm.generate(PROMPT, GREEDY, use_tqdm=False, lora_request=lr)
    return out[0].outputs[0].text


def test_models_list_adapters(served):
    llm, srv, _ = served
    c = OpenAI(base_url=srv.url + "/v1", api_key="k")
    assert [(m.id, getattr(m, "parent", None)) for m in c.models.list()] == [("base", None), ("a0", "base"), ("a1", "base")]
    assert c.models.retrieve("a1").parent == "base"


def test_completions_and_chat_per_adapter(served):
    llm, srv, _ = served
    c = OpenAI(base_url=srv.url + "/v1", api_key="k")
    texts = {}
    for model in ("base", "a0", "a1"):
        r = c.completions.create(model=model, prompt=PROMPT, temperature=0, max_tokens=12)
        assert r.model == model and r.choices[0].text == _want(llm, srv, model if model != "base" else None)
        texts[model] = r.choices[0].text
        s = c.completions.create(model=model, prompt=PROMPT, temperature=0, max_tokens=12, stream=True)
        assert "".join(ch.choices[0].text for ch in s if ch.choices) == texts[model]
    assert len(set(texts.values())) == 3, texts                     # each adapter changes the text
    for model in ("a0", "a1"):
        want = _want(llm, srv, model, chat=True)
        r = c.chat.completions.create(model=model, messages=MSGS, temperature=0, max_tokens=12)
        assert r.choices[0].message.content == want
        s = c.chat.completions.create(model=model, messages=MSGS, temperature=0, max_tokens=12, stream=True)
        assert "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices) == want


def test_unknown_model_is_404(served):
    _, srv, _ = served
    c = OpenAI(base_url=srv.url + "/v1", api_key="k")
    with pytest.raises(NotFoundError) as e: c.completions.create(model="nope", prompt=PROMPT, max_tokens=2)
    assert e.value.code == "model_not_found" and "'a0'" in str(e.value)


def test_load_and_unload_at_run_time(served):
    llm, srv, paths = served
    c = OpenAI(base_url=srv.url + "/v1", api_key="k")
    post = lambda path, body, key="k": _post(srv.url + path, body, key)
    assert post("/v1/load_lora_adapter", {"lora_name": "a2", "lora_path": paths["a2"]}, None)[0] == 401   # behind the key
    code, text = post("/v1/load_lora_adapter", {"lora_name": "a2", "lora_path": paths["a2"]})
    assert code == 200 and "a2" in text, text
    assert "a2" in [m.id for m in c.models.list()]
    got = c.completions.create(model="a2", prompt=PROMPT, temperature=0, max_tokens=12).choices[0].text
    assert got == _want(llm, srv, "a2")
    code, text = post("/v1/load_lora_adapter", {"lora_name": "a2", "lora_path": paths["a2"]})
    assert code == 400 and "served already" in json.loads(text)["error"]["message"]
    code, text = post("/v1/load_lora_adapter", {"lora_name": "bad", "lora_path": paths["a2"] + "/nowhere"})
    assert code == 400 and "adapter_config.json: not found" in json.loads(text)["error"]["message"]
    assert post("/v1/unload_lora_adapter", {"lora_name": "a2"})[0] == 200
    with pytest.raises(NotFoundError): c.completions.create(model="a2", prompt=PROMPT, max_tokens=2)
    assert post("/v1/unload_lora_adapter", {"lora_name": "a2"})[0] == 404
    # the base and the start-up adapters still answer as before
    assert c.completions.create(model="a0", prompt=PROMPT, temperature=0, max_tokens=12).choices[0].text == _want(llm, srv, "a0")


def test_lora_routes_refused_without_enable_lora(tmp_path):
    llm = LLM(stand_in_model(tmp_path / "m"))
    with pytest.raises(ValueError, match="enable_lora"): start_server(llm, lora_modules={"a": str(tmp_path)})
    with start_server(llm) as srv:
        code, text = _post(srv.url + "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": str(tmp_path)}, None)
        assert code == 400 and "--enable-lora" in json.loads(text)["error"]["message"]


def _xllm(*args, **kw):
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return [sys.executable, "-m", "xllm", *args], dict(env=env, cwd=Path(__file__).resolve().parents[1], **kw)


def test_cli_generate_with_lora(served):
    llm, srv, paths = served
    cmd, kw = _xllm("generate", PROMPT, "-m", paths["model"], "--lora", paths["a0"], "--max-tokens", "12", "--temperature", "0")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == _want(llm, srv, "a0") + "\n"
    cmd, kw = _xllm("serve", "-m", paths["model"], "--lora-modules", f"a0={paths['a0']}", "--port", "0")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 2 and r.stderr.strip() == "xllm: error: --lora-modules needs --enable-lora", r.stderr[-2000:]


def test_cli_serve_lora_modules(served):
    "`xllm serve --enable-lora --lora-modules`, asked with the official client."
    llm, srv, paths = served
    cmd, kw = _xllm("serve", "-m", paths["model"], "--enable-lora", "--max-loras", "2", "--lora-modules", f"a0={paths['a0']}", f"a1={paths['a1']}",
                    "--port", "0", "--served-model-name", "base")
    p, url = launch(cmd, **kw)
    try:
        c = OpenAI(base_url=url + "/v1", api_key="unused")
        assert [m.id for m in c.models.list()] == ["base", "a0", "a1"]
        for model in ("base", "a1"):
            got = c.completions.create(model=model, prompt=PROMPT, temperature=0, max_tokens=12).choices[0].text
            assert got == _want(llm, srv, None if model == "base" else model)
    finally:
        p.terminate(); p.wait(60)


def test_gguf_lora_files(served, tmp_path):
    "llama.cpp's GGUF LoRA (written from a0's PEFT directory as convert_lora_to_gguf.py writes it) answers as a0, by the load route and `--lora`."
    from xllm.lora import peft_to_gguf
    llm, srv, paths = served
    g = str(peft_to_gguf(paths["a0"], llm.config, tmp_path / "a0.gguf"))
    c = OpenAI(base_url=srv.url + "/v1", api_key="k")
    assert _post(srv.url + "/v1/load_lora_adapter", {"lora_name": "g0", "lora_path": g})[0] == 200
    try:
        s = c.completions.create(model="g0", prompt=PROMPT, temperature=0, max_tokens=12, stream=True)
        assert "".join(ch.choices[0].text for ch in s if ch.choices) == _want(llm, srv, "a0")
    finally: assert _post(srv.url + "/v1/unload_lora_adapter", {"lora_name": "g0"})[0] == 200
    code, text = _post(srv.url + "/v1/load_lora_adapter", {"lora_name": "bad", "lora_path": paths["model"] + "/config.json"})
    assert code == 400 and "not a GGUF file" in json.loads(text)["error"]["message"], text
    cmd, kw = _xllm("generate", PROMPT, "-m", paths["model"], "--lora", g, "--max-tokens", "12", "--temperature", "0")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0 and r.stdout == _want(llm, srv, "a0") + "\n", r.stderr[-2000:]
