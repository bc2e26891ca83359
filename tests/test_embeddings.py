"Embeddings and reranking served for real (issue #45): the official `openai` client's `embeddings.create` and `/v1/rerank`."
import json, urllib.request
import numpy as np
import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")

from xllm.stand_ins import stand_in_model
from xllm.llm import LLM
from xllm.server import start_server


def _one_token_texts(tok, n=2):
    "`n` texts that are one token each for `tok` (for the reranker's yes / no)."
    out = []
    for t in range(3, tok.vocab_size):
        s = tok.decode([t])
        if s.strip() and tok.encode(s, add_bos=False) == [t]: out.append(s)
        if len(out) == n: return out
    pytest.skip("no one-token texts in this tokenizer")


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    path = stand_in_model(tmp_path_factory.mktemp("stand-in"))
    yes, no = _one_token_texts(LLM(path).tokenizer)
    return LLM(path, reranker={"template": "Query: {query}\nDocument: {document}\nRelevant:", "yes": yes, "no": no})


@pytest.fixture(scope="module")
def server(llm):
    srv = start_server(llm, model_name="m")
    yield srv
    srv.stop()


def _post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r: return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read())


def test_openai_embeddings_float_and_base64(llm, server):
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=60)
    texts = ["Once upon a time", "there was a cat", "x"]
    ref = llm.embed(texts)
    r = c.embeddings.create(model="m", input=texts, encoding_format="float")
    got = np.array([d.embedding for d in r.data])
    assert got.shape == (3, llm.config.hidden_size) and [d.index for d in r.data] == [0, 1, 2]
    assert np.abs(got - np.array(ref)).max() <= 1e-5                         # the same vectors as LLM.embed, within float32 rounding
    assert r.usage.prompt_tokens == r.usage.total_tokens == sum(len(llm.pooling_ids(t)) for t in texts)
    r64 = c.embeddings.create(model="m", input=texts, dimensions=16)     # the client asks for base64 and decodes it itself
    want = np.array(llm.embed(texts, dimensions=16))
    got64 = np.array([d.embedding for d in r64.data])
    assert got64.shape == (3, 16) and np.abs(got64 - want).max() <= 1e-5
    assert np.allclose(np.linalg.norm(got64, axis=1), 1, atol=1e-5)       # cut to 16, then normalized
    ids = llm.tokenizer.encode("Once upon", add_bos=False)
    r = c.embeddings.create(model="m", input=[ids], encoding_format="float")   # token ids
    assert np.abs(np.array(r.data[0].embedding) - np.array(llm.embed([ids])[0])).max() <= 1e-5
    with pytest.raises(openai.BadRequestError) as e: c.embeddings.create(model="m", input=[1] * 10**4, encoding_format="float")
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError): c.embeddings.create(model="m", input="a", dimensions=10**6)


def test_rerank_top_n(llm, server):
    q, docs = "a cat", ["the cat sat", "a dog ran", "cats and cats", "nothing at all"]
    ref = llm.score(q, docs)
    s, b = _post(server.url + "/v1/rerank", {"model": "m", "query": q, "documents": docs, "top_n": 2})
    assert s == 200 and len(b["results"]) == 2
    best = sorted(range(4), key=lambda i: -ref[i])[:2]
    assert [r["index"] for r in b["results"]] == best
    for r in b["results"]:
        assert abs(r["relevance_score"] - ref[r["index"]]) <= 1e-5 and r["document"]["text"] == docs[r["index"]]
    s, b = _post(server.url + "/rerank", {"query": q, "documents": docs, "return_documents": False})
    assert s == 200 and len(b["results"]) == 4 and "document" not in b["results"][0]
    s, b = _post(server.url + "/v1/score", {"model": "m", "text_1": q, "text_2": docs})
    assert s == 200 and all(abs(d["score"] - ref[d["index"]]) <= 1e-5 for d in b["data"])
    s, b = _post(server.url + "/v1/rerank", {"query": q, "documents": docs, "top_n": -1})
    assert s == 400 and b["error"]["param"] == "top_n"


def test_cuda_runner_pooling(dev):
    "Pooling requests through the CUDA runner's ragged path (eager; on a GPU or the emulator), mixed with generation, equal to each alone."
    import random, torch
    from test_cuda_runner import tiny_model
    from xllm.engine import Engine
    from xllm.cuda_runner import CudaRunner
    from xllm.pooling import PoolingParams, pool_reference
    from xllm.sampling import SamplingParams
    m = tiny_model(3, torch.float32, dev, num_hidden_layers=2)

    def hidden_alone(ids):
        c = m.new_cache(len(ids)); b = c.batch(ids); b.hidden_rows = torch.arange(len(ids), device=dev)
        return m(b, c)[1].cpu()

    def greedy_alone(ids, n):
        out = list(ids)
        for _ in range(n): out.append(int(m(torch.tensor(out, device=dev), m.new_cache(len(out)))[-1].argmax()))
        return out[len(ids):]

    rng = random.Random(0)
    gens = [([rng.randrange(3, 300) for _ in range(rng.randint(4, 20))], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)) for _ in range(4)]
    embs = [([rng.randrange(3, 300) for _ in range(rng.randint(1, 40))], PoolingParams(("last", "mean", "cls")[i % 3], i % 2 == 0)) for i in range(6)]
    eng = Engine(m, block_size=8, num_blocks=40, max_num_seqs=8, max_num_batched_tokens=32, runner=CudaRunner, runner_options={"enforce_eager": True})
    assert eng.runner.name == "cuda"
    ids = [eng.add_request(p, sp) for p, sp in gens] + [eng.add_request(p, pp) for p, pp in embs]
    toks, pooled = {i: [] for i in ids}, {}
    while eng.has_unfinished():
        for o in eng.step():
            toks[o.request_id] += o.new_token_ids
            if o.pooled is not None: pooled[o.request_id] = o.pooled
    assert all(toks[r] == greedy_alone(p, 4) for r, (p, _) in zip(ids, gens))
    for r, (p, pp) in zip(ids[len(gens):], embs):
        want = pool_reference(hidden_alone(p), pp)
        assert float((pooled[r] - want).abs().max() / want.abs().max()) < 1e-4, (pp, p)


def test_embed_task_refuses_generation(tmp_path):
    "`task='embed'`: `LLM.embed` answers, `generate` is a ValueError naming the task, and a served completion or chat a 400 naming `model`."
    path = stand_in_model(tmp_path / "m")
    emb = LLM(path, task="embed", runner="torch")
    v = emb.embed(["hello there"])
    assert len(v) == 1 and abs(float(np.linalg.norm(v[0])) - 1) < 1e-5
    with pytest.raises(ValueError, match="task='embed': this engine embeds or scores"): emb.generate("hello")
    srv = start_server(emb, model_name="m")
    try:
        for route, body in (("/v1/completions", {"prompt": "hi", "max_tokens": 2}), ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})):
            status, err = _post(srv.url + route, body)
            assert status == 400 and err["error"]["param"] == "model" and "task='embed'" in err["error"]["message"], (route, status, err)
        status, ok = _post(srv.url + "/v1/embeddings", {"input": "hello there"})
        assert status == 200 and len(ok["data"]) == 1
    finally: srv.stop()
