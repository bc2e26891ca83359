"The OpenAI-compatible server (xllm.server) started for real on a loopback port and driven with the official `openai` client."
import json, threading, time, urllib.request, urllib.error
import pytest
import torch

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")

from _waits import wait_for, slow_down
from xllm.stand_ins import stand_in_model
from xllm.core import find_shared
from xllm.llm import LLM
from xllm.sampling import SamplingParams
from xllm.server import start_server

KEY = "test-key"


def _random_llm(tmp):
    "A tiny random LlamaForCausalLM (transformers) with a SentencePiece tokenizer trained here."
    transformers = pytest.importorskip("transformers"); spm = pytest.importorskip("sentencepiece")
    text = tmp / "corpus.txt"
    text.write_text("\n".join(f"the cat number {i} sat on the mat and looked at the dog {i * 7 % 13}." for i in range(300)))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp / "tokenizer"), vocab_size=400, model_type="bpe",
                                   byte_fallback=True, bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=128, bos_token_id=1, eos_token_id=2)
    transformers.LlamaForCausalLM(cfg).save_pretrained(tmp, safe_serialization=True)
    (tmp / "tokenizer.model").exists() or pytest.skip("sentencepiece did not write tokenizer.model")
    return LLM(tmp)


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    sh = find_shared()
    if sh is not None and (sh / "models" / "stories260K.bin").exists():
        return LLM(sh / "models" / "stories260K.bin", tokenizer=sh / "models" / "tok512.model")
    return LLM(stand_in_model(tmp_path_factory.mktemp("stand-in")))   # stories260K's shape: the same limits, the same assertions


@pytest.fixture(scope="module")
def server(llm):
    srv = start_server(llm, api_key=KEY, model_name="m")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def _greedy(llm, prompt, n):
    return llm.generate(prompt, SamplingParams(temperature=0, max_tokens=n), use_tqdm=False)[0].outputs[0]


def _raw(server, path, body=None, key=KEY, data=None):
    "POST (or GET when body and data are None) with urllib; returns (status, parsed JSON)."
    h = {"Content-Type": "application/json"}
    if key: h["Authorization"] = f"Bearer {key}"
    payload = data if data is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(server.url + path, data=payload, headers=h, method="POST" if payload is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as r: return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read())


def _chunked(server, path, parts, key=KEY):
    "POST `parts` as a chunked body (Transfer-Encoding: chunked, no Content-Length) on a raw socket; returns (status, parsed JSON)."
    import socket
    with socket.create_connection((server.host, server.port), timeout=30) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer {key}\r\n"
                  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode())
        try:
            for p in parts: s.sendall(b"%x\r\n%s\r\n" % (len(p), p))
            s.sendall(b"0\r\n\r\n")
        except OSError: pass                                            # the server may answer and close before the end
        data = b""
        try:
            while chunk := s.recv(65536): data += chunk
        except ConnectionResetError: pass    # closed with our unsent body unread: the answer read before the reset stands
    head, _, body = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():                  # a chunked reply: join its chunks
        out, rest = b"", body
        while rest:
            n, _, rest = rest.partition(b"\r\n")
            if int(n, 16) == 0: break
            out, rest = out + rest[:int(n, 16)], rest[int(n, 16) + 2:]
        body = out
    return int(head.split()[1]), json.loads(body)


def _idle(server, timeout=60):
    "Wait (at most `timeout` s, so a loaded machine does not fail it) until the engine has no request and no used KV block; return the last /health."
    t0 = time.time()
    while True:
        _, h = _raw(server, "/health")
        if (h["unfinished"] == 0 and h["used_blocks"] == 0 and h["in_flight"] == 0) or time.time() - t0 > timeout: return h
        time.sleep(0.05)


def test_models_and_health(server, client):
    assert [m.id for m in client.models.list().data] == ["stories260K.bin"] or len(client.models.list().data) == 1
    s, h = _raw(server, "/health", key=None)
    assert s == 200 and h == {"status": "ok"}                     # without the key: up or not, nothing more
    s, h = _raw(server, "/health")
    assert s == 200 and h["status"] == "ok" and h["num_blocks"] > 0


def test_completion_matches_llm_generate(llm, client):
    ref = _greedy(llm, "Once upon a time", 24)
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=24, temperature=0)
    assert r.choices[0].text == ref.text and r.choices[0].finish_reason == ref.finish_reason
    ids = llm.tokenizer.encode("Once upon a time", add_bos=llm.tokenizer.add_bos_token)
    assert r.usage.prompt_tokens == len(ids) and r.usage.completion_tokens == len(ref.token_ids)
    assert r.usage.total_tokens == len(ids) + len(ref.token_ids)
    # streaming: the deltas join to the same text; include_usage adds a final usage chunk with no choices
    chunks = list(client.completions.create(model="m", prompt="Once upon a time", max_tokens=24, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == ref.text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == ref.finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(ref.token_ids)


def test_prompt_list_and_n(llm, client):
    r = client.completions.create(model="m", prompt=["Once upon a time", "The dog"], max_tokens=8, temperature=0, n=2)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].text == r.choices[1].text == _greedy(llm, "Once upon a time", 8).text
    assert r.choices[2].text == _greedy(llm, "The dog", 8).text


def test_chat(llm, client):
    msgs = [{"role": "user", "content": "Tell me a story."}]
    ref = llm.chat(msgs, SamplingParams(temperature=0, max_tokens=16), use_tqdm=False)[0]
    r = client.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0)
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content == ref.outputs[0].text
    assert r.usage.prompt_tokens == len(ref.prompt_token_ids) and r.usage.completion_tokens == len(ref.outputs[0].token_ids)
    s = client.chat.completions.create(model="m", messages=msgs, max_completion_tokens=16, temperature=0, stream=True)
    chunks = list(s)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == ref.outputs[0].text
    assert chunks[-1].choices[0].finish_reason == ref.outputs[0].finish_reason


def test_stop_strings(llm, client):
    full = _greedy(llm, "Once upon a time", 40).text
    words = full.split()
    stop = words[len(words) // 2]
    expect = full[:full.find(stop)]
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=40, temperature=0, stop=[stop])
    assert r.choices[0].text == expect and r.choices[0].finish_reason == "stop" and stop not in r.choices[0].text
    s = client.completions.create(model="m", prompt="Once upon a time", max_tokens=40, temperature=0, stop=stop, stream=True)
    assert "".join(c.choices[0].text for c in s) == expect


def test_seed(llm, client):
    kw = dict(model="m", prompt="Once upon a time", max_tokens=20, temperature=1.0, top_p=0.9, presence_penalty=0.5, frequency_penalty=0.3,
              extra_body={"top_k": 50, "min_p": 0.01})
    a, b = (client.completions.create(seed=1234, **kw).choices[0].text for _ in range(2))
    assert a == b
    others = {client.completions.create(seed=s, **kw).choices[0].text for s in range(5)}
    assert len(others) > 1                                              # the seed matters
    # n choices of a seeded request each have their own stream, the same as LLM.generate's for that prompt and choice
    ps = ["Once upon a time", "The dog"]
    r = client.completions.create(model="m", prompt=ps, n=2, max_tokens=12, temperature=1.5, seed=7)   # 1.5: two streams rarely agree
    ref = llm.generate(ps, SamplingParams(n=2, max_tokens=12, temperature=1.5, seed=7), use_tqdm=False)  # (at 1.0: 4 seeds in 40 did)
    assert [c.text for c in r.choices] == [c.text for o in ref for c in o.outputs] and r.choices[0].text != r.choices[1].text


def test_errors(server, client, llm):
    def bad(**kw):
        with pytest.raises(openai.BadRequestError) as e: client.completions.create(model="m", **kw)
        err = e.value.body
        assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"
        return err
    assert bad(prompt="a", max_tokens=-1)["param"] == "max_tokens"
    assert bad(prompt="a", temperature=-0.5)["param"] == "temperature"
    assert bad(prompt="a", top_p=0)["param"] == "top_p"
    assert bad(prompt="a", n=0)["param"] == "n"
    assert bad(prompt="a", max_tokens="many")["param"] == "max_tokens"     # wrong type
    assert "context" in bad(prompt="once " * (llm.max_model_len + 10))["message"]
    s, body = _raw(server, "/v1/completions", data=b'{"prompt": "a", ')
    assert s == 400 and "JSON" in body["error"]["message"]
    s, body = _raw(server, "/v1/chat/completions", {"messages": "hi"})
    assert s == 400 and body["error"]["param"] == "messages"
    for key in (None, "wrong"):
        s, body = _raw(server, "/v1/completions", {"prompt": "a"}, key=key)
        assert s == 401 and body["error"]["type"] == "authentication_error"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="nope", max_retries=0).models.list()
    assert client.completions.create(model="m", prompt="a", max_tokens=2).choices       # still serving


def _stream_text(client, prompt, n, out, i):
    s = client.completions.create(model="m", prompt=prompt, max_tokens=n, temperature=0, stream=True)
    out[i] = "".join(c.choices[0].text for c in s)


def test_load_32_streams_equal_generate(llm, server, client, record_property):
    """32 concurrent streaming clients (different prompts and lengths, greedy) all complete, each text equals LLM.generate's, bad
    requests in the middle get their 400s, and the engine is left with no request and no used KV block. The same 32 requests
    one after another give the same texts; both throughputs are printed (reported, not asserted: the machine is shared)."""
    words = ["cat", "dog", "girl", "boy", "tree", "bird", "fish", "ball"]
    reqs = [(f"{['Once upon a time', 'One day', 'Lily saw a', 'The little'][i % 4]} {words[i // 4]}{' and the sun' * (i % 3)}", 4 + (i * 7) % 21)
            for i in range(32)]
    assert len(set(reqs)) == 32
    refs = [o.outputs[0] for o in llm.generate([p for p, _ in reqs], [SamplingParams(temperature=0, max_tokens=n) for _, n in reqs], use_tqdm=False)]
    ntok = sum(len(r.token_ids) for r in refs)
    out = [None] * len(reqs)
    ts = [threading.Thread(target=_stream_text, args=(client, p, n, out, i)) for i, (p, n) in enumerate(reqs)]
    errs = []
    def bad():                                                      # bad requests in the middle disturb nobody
        for kw in (dict(max_tokens=-3), dict(prompt="once " * (llm.max_model_len + 5)), dict(top_p=7), dict(prompt=[llm.config.vocab_size])):
            try: client.completions.create(model="m", **{"prompt": "a", **kw})
            except openai.BadRequestError as e: errs.append(e.status_code)
    ts.append(threading.Thread(target=bad))
    t0 = time.perf_counter()
    for t in ts: t.start()
    for t in ts: t.join(120)
    t_con = time.perf_counter() - t0
    assert out == [r.text for r in refs] and errs == [400] * 4
    h = _idle(server)
    assert h["unfinished"] == 0 and h["running"] == 0 and h["used_blocks"] == 0 and h["in_flight"] == 0, h
    seq = [None] * len(reqs)
    t0 = time.perf_counter()
    for i, (p, n) in enumerate(reqs): _stream_text(client, p, n, seq, i)
    t_seq = time.perf_counter() - t0
    assert seq == out
    msg = (f"32 streaming requests, {ntok} tokens: concurrent {t_con:.2f} s ({ntok / t_con:.0f} tok/s), "
           f"one after another {t_seq:.2f} s ({ntok / t_seq:.0f} tok/s), {t_seq / t_con:.1f}x")
    print(msg); record_property("throughput", msg)


def _metrics(server) -> dict:
    "GET /metrics parsed with prometheus-client's own parser: {sample name (+ finished_reason label): value}."
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(urllib.request.Request(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}), timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain"), r.headers["Content-Type"]
        text = r.read().decode()
    return {s.name + (f"[{s.labels['finished_reason']}]" if "finished_reason" in s.labels else ""): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_metrics_under_32_clients(llm, server, client, slow_steps):
    """/metrics during a 32-client streaming load: requests running, the K/V cache in use; after it, the gauges back at idle and
    the counters moved by exactly the load's tokens and requests, one time-to-first-token and one end-to-end latency per request."""
    pytest.importorskip("prometheus_client")
    reqs = [(f"Once upon a time number {i}", 3 + i % 5) for i in range(32)]
    refs = [o.outputs[0] for o in llm.generate([p for p, _ in reqs], [SamplingParams(temperature=0, max_tokens=n) for _, n in reqs], use_tqdm=False)]
    before = _metrics(server)
    out = [None] * len(reqs)
    ts = [threading.Thread(target=_stream_text, args=(client, p, n, out, i)) for i, (p, n) in enumerate(reqs)]
    for t in ts: t.start()
    during = wait_for(lambda: (m := _metrics(server))["vllm:num_requests_running"] >= 1 and m, what="requests running in /metrics")
    assert during["vllm:kv_cache_usage_perc"] > 0
    for t in ts: t.join(120)
    assert out == [r.text for r in refs]
    _idle(server)
    after = _metrics(server)
    d = lambda k: after.get(k, 0) - before.get(k, 0)
    assert after["vllm:num_requests_running"] == after["vllm:num_requests_waiting"] == after["vllm:kv_cache_usage_perc"] == 0
    n_gen = sum(len(r.token_ids) for r in refs)
    assert d("vllm:prompt_tokens_total") == sum(len(llm.encode_prompt(p)[1]) for p, _ in reqs)
    assert d("vllm:generation_tokens_total") == n_gen
    assert d("vllm:time_to_first_token_seconds_count") == d("vllm:e2e_request_latency_seconds_count") == 32
    assert d("vllm:inter_token_latency_seconds_count") == n_gen - 32
    assert d("vllm:request_success_total[stop]") + d("vllm:request_success_total[length]") == 32
    assert d("vllm:prefix_cache_queries_total") >= d("vllm:prefix_cache_hits_total") >= 0
    after = _metrics(server)                                  # this server does not speculate: its counters are there, at 0
    assert after["vllm:spec_decode_num_draft_tokens_total"] == after["vllm:spec_decode_num_accepted_tokens_total"] == after["vllm:spec_decode_num_drafts_total"] == 0


def test_cancel_frees_everything(server, client, slow_steps):
    "20 clients close their streams at random points (after 0..15 chunks); nothing stays running or allocated."
    import random
    rng = random.Random(0)
    points = [rng.randrange(16) for _ in range(20)]
    def cut(k):
        s = client.completions.create(model="m", prompt=f"Once upon a time {k}", max_tokens=200, temperature=0.8, stream=True,
                                      extra_body={"ignore_eos": True})
        for j, _ in enumerate(s):
            if j >= k: break
        s.close()
    core = server.app.state.xllm.core
    before = core.num_batched_tokens
    ts = [threading.Thread(target=cut, args=(k,)) for k in points]
    for t in ts: t.start()
    for t in ts: t.join(60)
    h = _idle(server)
    assert h["unfinished"] == 0 and h["running"] == 0 and h["used_blocks"] == 0 and h["in_flight"] == 0, h
    assert core.scheduler.running == [] and core.block_manager.num_used_blocks == 0
    assert core.num_batched_tokens - before < 20 * 100, "closed streams kept generating"     # 20 x 200 if nothing was aborted


def test_overload_503(llm, monkeypatch):
    srv = start_server(llm, max_num_seqs=1, max_waiting=0, model_name="m")
    slow_down(srv, monkeypatch)                                  # the first request's 100 steps take >= 2 s: still running below
    try:
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
        s = c.completions.create(model="m", prompt="Once upon a time", max_tokens=100, stream=True)
        next(iter(s))                                             # the first request is running
        with pytest.raises(openai.InternalServerError) as e: c.completions.create(model="m", prompt="a", max_tokens=2)
        assert e.value.status_code == 503 and e.value.body["code"] == "overloaded"
        s.close()
        assert _idle(srv)["in_flight"] == 0
        assert c.completions.create(model="m", prompt="a", max_tokens=2).choices   # served again once the first is gone
    finally: srv.stop()


def test_random_model_server(tmp_path):
    "The same checks on a tiny random transformers model with a SentencePiece tokenizer trained here (no shared data needed)."
    llm = _random_llm(tmp_path)
    ref = _greedy(llm, "the cat", 12)
    with start_server(llm, model_name="m") as srv:
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
        r = c.completions.create(model="m", prompt="the cat", max_tokens=12, temperature=0)
        assert r.choices[0].text == ref.text and r.usage.completion_tokens == len(ref.token_ids)
        assert "".join(ch.choices[0].text for ch in c.completions.create(model="m", prompt="the cat", max_tokens=12, temperature=0, stream=True)) == ref.text


def test_logprobs(llm, client):
    "logprobs of each sampled token and the top alternatives equal log_softmax of LLM.logits on prompt + output (float32, 1e-4)."
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text and len(lp.tokens) == r.usage.completion_tokens
    ids = llm.tokenizer.encode("Once upon a time", add_bos=llm.tokenizer.add_bos_token)
    out = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)[0].outputs[0].token_ids
    ref = llm.logits(ids + out)[len(ids) - 1:-1].log_softmax(-1)
    from xllm.server import _token_bytes
    for k, tok in enumerate(out):
        assert abs(lp.token_logprobs[k] - ref[k, tok].item()) < 1e-4
        top, want = ref[k].topk(3), {}
        for v, j in zip(top.values.tolist(), top.indices.tolist()):   # ids of the same text (byte pieces: '\ufffd') share one key: the likelier
            want.setdefault(_token_bytes(llm.tokenizer, j).decode("utf-8", "replace"), v)
        assert list(lp.top_logprobs[k]) == list(want) and list(lp.top_logprobs[k].values()) == pytest.approx(list(want.values()), abs=1e-4)
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:k]) for k in range(len(lp.tokens))]
    # sampled: each token is among its own top_logprobs (its text's likeliest id, when ids share a text), beside the `logprobs` likeliest
    for k in (0, 1):
        r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=1.0, seed=1, logprobs=k)
        s = r.choices[0].logprobs
        for tk, v, top in zip(s.tokens, s.token_logprobs, s.top_logprobs):
            assert top.get(tk, -float("inf")) >= v and len(top) <= k + 1 and list(top.values()) == sorted(top.values(), reverse=True), (tk, v, top)
        if k == 0: assert s.top_logprobs == [{tk: v} for tk, v in zip(s.tokens, s.token_logprobs)]
    c = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0,
                                       logprobs=True, top_logprobs=2)
    content = c.choices[0].logprobs.content
    assert len(content) == c.usage.completion_tokens and all(len(t.top_logprobs) == 2 for t in content)
    assert all(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob and t.logprob <= 0 for t in content)
    with pytest.raises(openai.BadRequestError): client.completions.create(model="m", prompt="a", logprobs=50)
    with pytest.raises(openai.BadRequestError): client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], top_logprobs=2)
    # streaming: the chunks' logprobs join to the same lists
    toks, tlp, offs = [], [], []
    for ch in client.completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=0, logprobs=3, stream=True):
        if ch.choices and ch.choices[0].logprobs:
            toks += ch.choices[0].logprobs.tokens; tlp += ch.choices[0].logprobs.token_logprobs; offs += ch.choices[0].logprobs.text_offset
    assert toks == lp.tokens and offs == lp.text_offset and tlp == pytest.approx(lp.token_logprobs, abs=1e-5)


@pytest.fixture
def slow_steps(server, monkeypatch): return slow_down(server, monkeypatch)


def _post_and_leave(server, body: dict):
    "Send a non-streaming POST on a raw socket; once the engine is generating for it, close the socket. Returns the /health at that moment."
    import socket
    data = json.dumps(body).encode()
    s = socket.create_connection((server.host, server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\n"
              b"Content-Length: %d\r\n\r\n" % (KEY.encode(), len(data)) + data)
    h = wait_for(lambda: (h := _raw(server, "/health")[1])["running"] == body.get("n", 1) and h, what="the request to run")
    s.close()
    return h


def test_nonstreaming_disconnect_aborts(llm, server, slow_steps, monkeypatch):
    "A non-streaming client that goes away is aborted at once: no running sequence, no used block soon after (and far fewer tokens computed)."
    import xllm.server as xs
    core, st = server.app.state.xllm.core, server.app.state.xllm
    body = {"prompt": "Once upon a time", "max_tokens": 450, "n": 4, "temperature": 0, "ignore_eos": True}
    before, gone = core.num_batched_tokens, st.disconnected
    h = _post_and_leave(server, body)
    assert h["running"] == 4, h                                         # still generating when the client left
    h = _idle(server)
    assert h["unfinished"] == 0 and h["running"] == 0 and h["used_blocks"] == 0 and h["in_flight"] == 0, h
    assert core.scheduler.running == [] and core.block_manager.num_used_blocks == 0
    assert core.num_batched_tokens - before < 4 * 450 // 2, "the abandoned request kept generating"
    assert st.disconnected == gone + 1
    # control: with the watch switched off the same request outlives its client (so the checks above can fail)
    async def no_watch(request, coro): return await coro
    monkeypatch.setattr(xs, "_unless_disconnected", no_watch)
    h = _post_and_leave(server, body)
    time.sleep(0.5)                                                     # 450 steps take >= 9 s: still running, not by luck
    assert _raw(server, "/health")[1]["running"] == 4
    for rid in list(core.requests): st.engine.abort(rid)               # clean up: abort it by hand
    assert _idle(server)["used_blocks"] == 0


def test_special_tokens_in_completion_prompts(llm, client):
    """A completion prompt that spells special tokens is read as those tokens (as vLLM and llama.cpp's servers read it); a chat
    message's content stays text."""
    tok = llm.tokenizer
    eos = tok.decode([tok.eos_id])
    prompt = f"Once upon a time{eos} The cat"
    want = llm.encode_prompt(prompt)[1]
    assert tok.eos_id in want and tok.eos_id not in tok.encode(prompt, add_bos=tok.add_bos_token)
    r = client.completions.create(model="m", prompt=prompt, max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens == len(want)
    text_ids = llm.encode_chat([{"role": "user", "content": prompt}])[1]
    c = client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}], max_tokens=1, temperature=0)
    assert c.usage.prompt_tokens == len(text_ids) and text_ids.count(tok.eos_id) <= llm.encode_chat([{"role": "user", "content": "x"}])[1].count(tok.eos_id)


def test_tokenize_detokenize(llm, server):
    "vLLM's /tokenize and /detokenize: the ids the completions would run on, the text of ids, and clear 400s."
    p = "Once upon a time"
    st, t = _raw(server, "/tokenize", {"prompt": p})
    assert st == 200 and t["tokens"] == llm.encode_prompt(p)[1] and t["count"] == len(t["tokens"]) and t["max_model_len"] == llm.max_model_len
    st, t2 = _raw(server, "/tokenize", {"prompt": p, "add_special_tokens": False})
    assert st == 200 and t2["tokens"] == llm.tokenizer.encode(p, allow_special=True)
    msgs = [{"role": "user", "content": p}]
    st, c = _raw(server, "/tokenize", {"messages": msgs})
    assert st == 200 and c["tokens"] == llm.encode_chat(msgs)[1]
    st, d = _raw(server, "/detokenize", {"tokens": t["tokens"]})
    assert st == 200 and d["prompt"] == llm.tokenizer.decode(t["tokens"])
    for path, body, param in [("/tokenize", {}, "prompt"), ("/tokenize", {"prompt": p, "messages": msgs}, "prompt"),
                              ("/tokenize", {"prompt": 5}, "prompt"), ("/detokenize", {"tokens": [-1]}, "tokens"),
                              ("/detokenize", {"tokens": [llm.tokenizer.vocab_size]}, "tokens"), ("/detokenize", {"tokens": [1.5]}, "tokens"),
                              ("/tokenize", {"messages": [{"role": "user", "content": 3}]}, "messages")]:
        st, e = _raw(server, path, body)
        assert st == 400 and e["error"]["param"] == param, (path, body, st, e)


def test_token_id_prompts(llm, server, client):
    "prompt as token ids (list[int]) or lists of them: the ids go to the engine as they are; bad ids are a 400 naming prompt."
    import random
    ids = llm.tokenizer.encode("Once upon a time", add_bos=llm.tokenizer.add_bos_token)
    ref = _greedy(llm, "Once upon a time", 12)
    r = client.completions.create(model="m", prompt=ids, max_tokens=12, temperature=0)
    assert r.choices[0].text == ref.text and r.usage.prompt_tokens == len(ids)
    rnd = [random.Random(1).randrange(llm.config.vocab_size) for _ in range(7)]
    ref2 = llm.generate({"prompt_token_ids": rnd}, SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)[0].outputs[0]
    r = client.completions.create(model="m", prompt=[ids, rnd], max_tokens=12, temperature=0)
    assert [c.text for c in r.choices] == [ref.text, ref2.text] and r.usage.prompt_tokens == len(ids) + 7
    assert r.usage.completion_tokens == len(ref.token_ids) + len(ref2.token_ids)
    s = client.completions.create(model="m", prompt=rnd, max_tokens=12, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in s) == ref2.text
    V = llm.config.vocab_size
    for prompt, words in (([], "empty list"), ([[]], "empty"), ([V], f"id {V} is outside the vocabulary"), ([[3], [-1]], "id -1 is outside"),
                          ([1.5], "prompt: expected"), ([[1], "a"], "prompt: expected"), ([True], "prompt: expected"),
                          ([1] * (llm.max_model_len + 1), "context")):
        s, body = _raw(server, "/v1/completions", {"prompt": prompt, "max_tokens": 2})
        assert s == 400 and body["error"]["param"] == "prompt" and words in body["error"]["message"], (prompt, body)


def test_sampling_fields_honoured(llm, client):
    """Each field changes what it should: min_p=1 and top_k=1 leave only the most likely token (= greedy whatever the seed);
    presence/frequency penalties give LLM.generate's text for the same params (and not the plain greedy one);
    max_completion_tokens caps chat; n streams n choices; include_usage on chat; a stop list cuts at its first match."""
    P, N = "Once upon a time", 30
    greedy = _greedy(llm, P, N).text
    assert client.completions.create(model="m", prompt=P, max_tokens=N, temperature=1.0, seed=0).choices[0].text != greedy   # control
    for kw in ({"min_p": 1.0}, {"top_k": 1}):
        assert client.completions.create(model="m", prompt=P, max_tokens=N, temperature=1.0, seed=0, extra_body=kw).choices[0].text == greedy
    for kw in (dict(frequency_penalty=1.5), dict(presence_penalty=2.0)):
        ref = llm.generate(P, SamplingParams(temperature=0, max_tokens=N, **kw), use_tqdm=False)[0].outputs[0].text
        assert client.completions.create(model="m", prompt=P, max_tokens=N, temperature=0, **kw).choices[0].text == ref != greedy
    msgs = [{"role": "user", "content": "Tell me a story."}]
    r = client.chat.completions.create(model="m", messages=msgs, max_completion_tokens=7, temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 7 and r.choices[0].finish_reason == "length"
    chunks = list(client.chat.completions.create(model="m", messages=msgs, max_tokens=9, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    ref = llm.chat(msgs, SamplingParams(temperature=0, max_tokens=9), use_tqdm=False)[0]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ref.outputs[0].text
    assert chunks[-1].choices == [] and all(c.usage is None for c in chunks[:-1])
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (len(ref.prompt_token_ids), len(ref.outputs[0].token_ids))
    texts = {}
    for c in client.completions.create(model="m", prompt=P, max_tokens=N, temperature=0, n=3, stream=True):
        for ch in c.choices: texts[ch.index] = texts.get(ch.index, "") + ch.text
    assert texts == {0: greedy, 1: greedy, 2: greedy}
    words = greedy.split()
    first, later = words[len(words) // 3], words[2 * len(words) // 3]
    cut = min(greedy.find(first), greedy.find(later))
    r = client.completions.create(model="m", prompt=P, max_tokens=N, temperature=0, stop=[later, "zzzz", first])
    assert r.choices[0].text == greedy[:cut] and r.choices[0].finish_reason == "stop"


def test_null_options_mean_defaults(server, llm):
    "OpenAI clients may send null for unset options: the request is answered as if they were absent."
    nulls = dict.fromkeys(("temperature", "top_p", "n", "stream", "presence_penalty", "frequency_penalty", "top_k", "min_p",
                           "repetition_penalty", "seed", "stop", "logprobs", "user", "stream_options", "logit_bias", "best_of"))
    ref = _raw(server, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0})[1]["choices"][0]["text"]
    s, body = _raw(server, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 6, **nulls, "temperature": 0})
    assert s == 200 and body["choices"][0]["text"] == ref, body
    s, body = _raw(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, **nulls,
                                                    "logprobs": None, "top_logprobs": None, "tools": None, "response_format": None})
    assert s == 200 and len(body["choices"]) == 1, body
    assert _raw(server, "/v1/completions", {"prompt": None})[0] == 400


def test_unsupported_options_refused_by_name(server):
    "Options xllm does not implement are a 400 naming them, not silently ignored; chat roles are checked."
    chat = lambda **kw: {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **kw}
    for path, body, param in (("/v1/completions", {"prompt": "a", "suffix": "b"}, "suffix"),
                              ("/v1/completions", {"prompt": "a", "best_of": 3}, "best_of"),
                              ("/v1/chat/completions", chat(functions=[{"name": "f"}]), "functions"),
                              ("/v1/chat/completions", chat(tools=[{"type": "function", "function": {"name": "f"}}], tool_choice={"type": "function", "function": {"name": "g"}}), "tool_choice"),
                              ("/v1/chat/completions", chat(tools=[{"type": "function", "function": {"name": "bad name"}}]), "tools"),
                              ("/v1/chat/completions", chat(response_format={"type": "xml"}), "response_format"),
                              ("/v1/chat/completions", chat(logit_bias={"not-an-id": 3}), "logit_bias"),
                              ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, "messages"),
                              ("/v1/chat/completions", {"messages": [{"role": "user", "content": None}]}, "messages"),
                              ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}, {"role": "tool"}]}, "messages")):
        s, b = _raw(server, path, body)
        assert s == 400 and b["error"]["param"] == param, (body, b)
    s, b = _raw(server, "/v1/chat/completions", {"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}], "max_tokens": 2})
    assert s == 200, b


def test_echo_and_logit_bias(llm, server, client):
    "echo returns prompt + completion (streamed too); logit_bias +100 on one token makes greedy decoding pick only it, -100 bans one."
    ref = _greedy(llm, "Once upon a time", 8).text
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=0, echo=True)
    assert r.choices[0].text == "Once upon a time" + ref
    assert "".join(c.choices[0].text for c in client.completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=0,
                                                                          echo=True, stream=True)) == "Once upon a time" + ref
    ids = llm.tokenizer.encode("Once upon a time", add_bos=llm.tokenizer.add_bos_token)
    plain = llm.generate({"prompt_token_ids": ids}, SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)[0].outputs[0].token_ids
    from xllm.server import _token_bytes
    piece = lambda i: _token_bytes(llm.tokenizer, i).decode("utf-8", "replace")
    t = 300 if plain[0] != 300 else 301
    forced = client.completions.create(model="m", prompt=ids, max_tokens=5, temperature=0, logit_bias={str(t): 100}, logprobs=0,
                                       extra_body={"ignore_eos": True})
    assert forced.choices[0].logprobs.tokens == [piece(t)] * 5
    banned = client.completions.create(model="m", prompt=ids, max_tokens=3, temperature=0, logit_bias={str(plain[0]): -100}, logprobs=0)
    assert banned.choices[0].logprobs.tokens[0] != piece(plain[0])
    ctrl = client.completions.create(model="m", prompt=ids, max_tokens=3, temperature=0, logprobs=0)      # control: unbiased
    assert ctrl.choices[0].logprobs.tokens[0] == piece(plain[0])


def test_echo_logprobs_scores_the_prompt(llm, server, client):
    """`echo` + `logprobs` (what lm-eval sends to score a text): the prompt's tokens come back with their log-probabilities (null for
    the first) equal to `LLM.logits` in float64, then the completion's; `max_tokens: 0` scores the prompt and generates nothing;
    streamed, the echoed prompt comes in one chunk with its log-probabilities."""
    tok = llm.tokenizer
    ids = tok.encode("Once upon a time there was a little", add_bos=tok.add_bos_token)
    ref = torch.log_softmax(llm.logits(ids).double(), -1)
    gen = _greedy(llm, {"prompt_token_ids": ids}, 3)
    for mt in (0, 3):
        r = client.completions.create(model="m", prompt=ids, max_tokens=mt, temperature=0, echo=True, logprobs=2)
        c, lp = r.choices[0], r.choices[0].logprobs
        assert len(lp.tokens) == len(ids) + mt and r.usage.completion_tokens == mt and c.finish_reason == "length"
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        for t in range(1, len(ids)):
            assert abs(lp.token_logprobs[t] - ref[t - 1, ids[t]].item()) < 1e-4, t
            assert abs(max(lp.top_logprobs[t].values()) - ref[t - 1].max().item()) < 1e-4 and len(lp.top_logprobs[t]) <= 3
            assert lp.tokens[t] in lp.top_logprobs[t]                   # the prompt's own token, beside its top 2 (OpenAI's legacy API, vLLM)
        assert c.text == tok.decode(ids, skip_special=True) + (gen.text if mt else "")
        from xllm.server import _token_bytes
        assert lp.tokens[len(ids):] == [_token_bytes(tok, t).decode("utf-8", "replace") for t in gen.token_ids[:mt]]
    chunks = list(client.completions.create(model="m", prompt=ids, max_tokens=2, temperature=0, echo=True, logprobs=1, stream=True))
    first = chunks[0].choices[0]
    assert first.text == tok.decode(ids, skip_special=True) and first.logprobs.token_logprobs[0] is None and len(first.logprobs.tokens) == len(ids)
    assert abs(first.logprobs.token_logprobs[-1] - ref[-2, ids[-1]].item()) < 1e-4
    assert _raw(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})[0] == 400   # chat: >= 1


def test_unknown_model_is_404(server, client):
    "A `model` other than the served name is a 404 `model_not_found` (as vLLM answers), on every endpoint that takes one; none is fine."
    for path, body in (("/v1/completions", {"prompt": "a", "max_tokens": 1}), ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "max_tokens": 1}),
                       ("/tokenize", {"prompt": "a"}), ("/detokenize", {"tokens": [5]})):
        s, b = _raw(server, path, {**body, "model": "gpt-4o"})
        assert s == 404 and b["error"]["code"] == "model_not_found" and "'m'" in b["error"]["message"], (path, b)
        assert _raw(server, path, body)[0] == 200 and _raw(server, path, {**body, "model": "m"})[0] == 200
    with pytest.raises(openai.NotFoundError): client.completions.create(model="m2", prompt="a", max_tokens=1)
    assert [m.id for m in client.models.list().data] == ["m"]


def test_context_limit_is_the_pool_when_smaller(llm):
    """With a K/V pool smaller than the model's context, /v1/models reports the pool's limit, a prompt or prompt + max_tokens
    beyond it is a 400 before anything runs (never a 500, never an answer cut short), and a request at the limit gets every token."""
    import copy, dataclasses
    from xllm.llm import _kv_block_bytes
    small = copy.copy(llm)                                                       # the same model, its own engine settings
    small.engine_config = dataclasses.replace(llm.engine_config, kv_cache_memory=12 * _kv_block_bytes(llm))   # 12 blocks of 16 = 192 tokens < 512
    small._engine = None
    with start_server(small, model_name="m") as srv:
        C = srv.app.state.xllm.max_len
        assert C == 192 < llm.max_model_len
        assert _raw(srv, "/v1/models", key=None)[1]["data"][0]["max_model_len"] == C
        for body, param in (({"prompt": [5] * 200, "max_tokens": 2}, "prompt"), ({"prompt": [5] * 150, "max_tokens": 100}, "max_tokens")):
            for stream in (False, True):
                s, b = _raw(srv, "/v1/completions", {**body, "stream": stream})
                assert s == 400 and b["error"]["param"] == param and b["error"]["code"] == "context_length_exceeded", b
                assert "--kv-cache-memory raises it" in b["error"]["message"], b          # why the limit is lower, and what raises it
        s, b = _raw(srv, "/v1/completions", {"prompt": "x" * (srv.app.state.xllm.max_chars + 1)})   # refused before tokenizing
        assert s == 400 and b["error"]["code"] == "context_length_exceeded" and "--kv-cache-memory raises it" in b["error"]["message"], b
        s, b = _raw(srv, "/v1/completions", {"prompt": [5] * 150, "max_tokens": C - 150, "ignore_eos": True})
        assert s == 200 and b["usage"]["completion_tokens"] == C - 150 and b["choices"][0]["finish_reason"] == "length", b
        s, b = _raw(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "ignore_eos": True})   # no max_tokens: up to the limit
        assert s == 200 and b["usage"]["total_tokens"] == C, b
        s, b = _raw(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "min_tokens": C})   # no max_tokens: min_tokens must fit
        assert s == 400 and b["error"]["param"] == "min_tokens" and b["error"]["code"] == "context_length_exceeded", b


def test_http_errors_are_openai_json(server, monkeypatch):
    "Unknown routes, wrong methods, bodies that are not UTF-8, oversize bodies and too many choices answer in OpenAI's error JSON."
    import xllm.server as xs
    s, b = _raw(server, "/v1/audio/transcriptions", {"input": "a"})    # (/v1/embeddings is served since #45)
    assert s == 404 and "/v1/completions" in b["error"]["message"]
    s, b = _raw(server, "/v1/completions")                                     # GET
    assert s == 405 and "GET" in b["error"]["message"]
    s, b = _raw(server, "/v1/completions", data=b'{"prompt": "\xff"}')
    assert s == 400 and "error" in b
    name = server.app.state.xllm.model_name
    assert _raw(server, f"/v1/models/{name}")[1]["id"] == name and _raw(server, "/v1/models/nope")[0] == 404
    monkeypatch.setattr(xs, "MAX_BODY_BYTES", 1000)
    s, b = _raw(server, "/v1/completions", {"prompt": "a" * 2000})
    assert s == 413 and "1000" in b["error"]["message"]
    s, b = _chunked(server, "/v1/completions", [b'{"prompt": "' + b"a" * 300] + [b"a" * 300] * 20 + [b'"}'])   # no Content-Length
    assert s == 413 and b["error"]["code"] == "request_too_large", b
    s, b = _chunked(server, "/v1/completions", [b'{"prompt": "Once', b' upon", "max_tokens": 2, "temperature": 0}'])  # chunked and small: served
    assert s == 200 and b["choices"][0]["text"] == _greedy(server.app.state.xllm.llm, "Once upon", 2).text, b
    monkeypatch.undo()
    s, b = _raw(server, "/v1/completions", {"prompt": "a", "n": 100, "max_tokens": 1})    # more than 32 + 64 at once: retrying cannot help
    assert s == 400 and b["error"]["param"] == "n", b
    st, _ = _raw(server, "/v1/models", key=None)
    assert st == 401
    req = urllib.request.Request(server.url + "/v1/models", headers={"Authorization": f"bearer {KEY}"})   # the scheme is case-insensitive
    with urllib.request.urlopen(req, timeout=30) as r: assert r.status == 200
