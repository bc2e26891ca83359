"""The server under hostile clients (issue 22): huge prompts refused before tokenizing, tokenization bounded, text that cannot be
UTF-8 encoded and -inf log-probs still answered in JSON, strict types, streams whose client stops reading aborted, an OpenAPI
schema of what the server really answers, and a bounded shutdown on SIGTERM."""
import http.client, json, os, signal, socket, sys, threading, time, urllib.error, urllib.request
import pytest

pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")

from _waits import wait_for, slow_down
from xllm.stand_ins import stand_in_model
from xllm.llm import LLM
from xllm.server import start_server, TOKENIZE_AT_ONCE, _loopback



@pytest.fixture(scope="module")
def model_dir(tmp_path_factory): return stand_in_model(tmp_path_factory.mktemp("stand-in"))


@pytest.fixture(scope="module")
def llm(model_dir): return LLM(model_dir)


@pytest.fixture(scope="module")
def server(llm):
    srv = start_server(llm)
    yield srv
    srv.stop()


def _post(srv, path, body, raw: bytes | None = None, conn=None):
    "POST JSON (or `raw` bytes) on `conn` (a kept-alive http.client connection) or a new one; returns (status, parsed JSON or text)."
    c = conn or http.client.HTTPConnection(srv.host, srv.port, timeout=60)
    c.request("POST", path, body=raw if raw is not None else json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    try: return r.status, json.loads(data)
    except ValueError: return r.status, data.decode("utf-8", "replace")


def test_huge_prompts_refused_before_tokenizing(server, llm, monkeypatch):
    "Text longer than max_len x the longest token cannot fit: a 400 at once, and the tokenizer never sees it (completions and chat)."
    st = server.app.state.xllm
    assert st.max_chars == st.max_len * st.longest_token and st.longest_token >= 1
    calls = []
    orig = type(llm).encode_prompt
    monkeypatch.setattr(type(llm), "encode_prompt", lambda self, p: (calls.append(len(p) if isinstance(p, str) else 0), orig(self, p))[1])
    huge = "a" * (st.max_chars + 1)
    t0 = time.time()
    for body in ({"prompt": huge}, {"prompt": ["hi", huge]}):
        s, b = _post(server, "/v1/completions", body)
        assert s == 400 and b["error"]["code"] == "context_length_exceeded" and b["error"]["param"] == "prompt", b
    s, b = _post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": huge[: st.max_chars // 2 + 1]},
                                                                {"role": "user", "content": huge[: st.max_chars // 2 + 1]}]})
    assert s == 400 and b["error"]["param"] == "messages" and "before tokenizing" in b["error"]["message"], b
    assert calls == [] and time.time() - t0 < 30
    s, b = _post(server, "/v1/completions", {"prompt": "a" * 600, "max_tokens": 1})     # under the cap: tokenized, then judged
    assert s == 400 and calls == [600] and "prompt" in b["error"]["message"], b


def test_request_shapes_refused_before_work(server, llm, monkeypatch):
    """Lists longer than a request can use are refused on the raw JSON, before pydantic builds them or anything is tokenized:
    prompts beyond what the server takes at once, token-id lists and conversations beyond max_len, too many or too long stop
    strings; prompts x n over the limit before the first prompt is tokenized; and the prompts are tokenized one at a time, each
    checked before the next, so one that does not fit stops the rest."""
    from xllm.server import MAX_STOP_STRINGS, MAX_STOP_CHARS
    st = server.app.state.xllm
    calls = []
    orig = type(llm).encode_prompt
    monkeypatch.setattr(type(llm), "encode_prompt", lambda self, p: (calls.append(p), orig(self, p))[1])
    limit, L = st.max_num_seqs + st.max_waiting, st.max_len
    for body, param, words in [({"prompt": [[]] * (limit + 1), "max_tokens": 1}, "prompt", f"{limit + 1} prompts"),
                               ({"prompt": [""] * (limit + 1), "max_tokens": 1}, "prompt", "prompts"),
                               ({"prompt": [0] * (L + 1), "max_tokens": 1}, "prompt", f"{L + 1} token ids"),
                               ({"prompt": [[1], [0] * (L + 1)], "max_tokens": 1}, "prompt", "prompt[1]"),
                               ({"prompt": ["a", "b"], "n": limit // 2 + 1, "max_tokens": 1}, "n", "completions"),
                               ({"prompt": "a", "stop": ["x"] * (MAX_STOP_STRINGS + 1)}, "stop", "stop strings"),
                               ({"prompt": "a", "stop": "x" * (MAX_STOP_CHARS + 1)}, "stop", "characters")]:
        s, b = _post(server, "/v1/completions", body)
        assert s == 400 and b["error"]["param"] == param and words in b["error"]["message"], (param, b)
    s, b = _post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}] * (L + 1)})
    assert s == 400 and b["error"]["param"] == "messages", b
    s, b = _post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "n": limit + 1})
    assert s == 400 and b["error"]["param"] == "n", b
    assert calls == []
    s, b = _post(server, "/v1/completions", {"prompt": ["Once", "once " * L, "upon", "a time"], "max_tokens": 1})
    assert s == 400 and b["error"]["param"] == "prompt" and "context" in b["error"]["message"] and len(calls) == 2, (b, calls)   # stopped at the second
    s, b = _post(server, "/v1/completions", {"prompt": "Once", "stop": ["x"] * MAX_STOP_STRINGS, "max_tokens": 2})
    assert s == 200, b                                                           # at the limits: served


def test_tokenization_is_bounded(server, llm, monkeypatch):
    "However many clients send prompts at once, at most TOKENIZE_AT_ONCE are tokenized together."
    now, peak, lock = [0], [0], threading.Lock()
    orig = type(llm).encode_prompt
    def slow_ids(self, p):
        with lock: now[0] += 1; peak[0] = max(peak[0], now[0])
        time.sleep(0.2)
        try: return orig(self, p)
        finally:
            with lock: now[0] -= 1
    monkeypatch.setattr(type(llm), "encode_prompt", slow_ids)
    out = []
    ts = [threading.Thread(target=lambda: out.append(_post(server, "/v1/completions", {"prompt": "Once", "max_tokens": 1})[0])) for _ in range(6)]
    for t in ts: t.start()
    for t in ts: t.join(60)
    assert out == [200] * 6 and peak[0] == TOKENIZE_AT_ONCE, (out, peak)


def test_responses_always_encode(server):
    "A lone surrogate echoed (non-streaming and streamed) becomes U+FFFD in valid UTF-8 JSON; the kept-alive connection still works."
    c = http.client.HTTPConnection(server.host, server.port, timeout=60)
    raw = b'{"prompt": "a\\ud800b", "echo": true, "max_tokens": 2, "temperature": 0}'
    s, b = _post(server, "/v1/completions", None, raw=raw, conn=c)
    assert s == 200 and b["choices"][0]["text"].startswith("a\ufffdb"), b
    s, b = _post(server, "/v1/completions", {"prompt": "Once", "max_tokens": 1}, conn=c)     # the same connection, next request
    assert s == 200, b
    c.request("POST", "/v1/completions", body=raw.replace(b'"echo"', b'"stream": true, "echo"'), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    events = [json.loads(l[6:]) for l in r.read().decode("utf-8").splitlines() if l.startswith("data: {")]
    assert r.status == 200 and events[0]["choices"][0]["text"] == "a\ufffdb", events
    s, b = _post(server, "/v1/chat/completions", None, conn=c, raw=b'{"messages": [{"role": "user", "content": "\\udfff"}], "max_tokens": 2}')
    assert s == 200 and "choices" in b, b


def test_masked_logprobs_are_json(llm):
    "A log-prob of -inf (a token the sampler masks, e.g. vocabulary rows the tokenizer cannot decode) is written as -9999.0: strict JSON."
    from xllm.server import _dumps, _logprobs
    lps = [(5, {5: -0.5, 6: float("-inf"), 7: -2.0})]
    for chat in (False, True):
        text = _dumps(_logprobs(llm.tokenizer, lps, chat, 3))
        assert "Infinity" not in text and "-9999.0" in text and json.loads(text)
    with pytest.raises(ValueError): json.dumps({"x": float("-inf")}, allow_nan=False)     # what failed before: starlette's JSON is strict


def _events(srv, path, body):
    "POST `body` streamed; (status, its events' data: parsed JSON, or '[DONE]')."
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=60)
    c.request("POST", path, body=json.dumps({**body, "stream": True}), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = [e.removeprefix("data: ") for e in r.read().decode().split("\n\n") if e]
    return r.status, [d if d == "[DONE]" else json.loads(d) for d in data]


def test_a_bug_in_a_stream_ends_it_with_an_error_event(server, monkeypatch):
    """An unexpected exception while a stream is answered (here where its tool calls are read) is logged, and the stream ends as a
    non-streaming request's 500 would answer: an error event (server_error, no internals), then [DONE]; the next request is served."""
    import logging
    from xllm import tools
    monkeypatch.setattr(tools.ToolStream, "finish", lambda self: 1 / 0)
    logged = []
    h = logging.Handler(); h.emit = logged.append
    logging.getLogger("uvicorn.error").addHandler(h)
    try: s, ev = _events(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                                                          "tools": [{"type": "function", "function": {"name": "f"}}]})
    finally: logging.getLogger("uvicorn.error").removeHandler(h)
    assert s == 200 and ev[-1] == "[DONE]" and ev[-2] == {"error": {"message": "internal server error (logged on the server)", "type": "server_error",
                                                                    "param": None, "code": None}}, ev[-3:]
    assert [r.exc_info[0] for r in logged] == [ZeroDivisionError]
    monkeypatch.undo()
    assert _post(server, "/v1/completions", {"prompt": "Once", "max_tokens": 1})[0] == 200


def test_grammar_failures_are_client_errors(server, monkeypatch):
    """A regex llguidance compiles but cannot run (its lexer over the limits at the first token) is a 400 naming the field before
    the engine runs it; a constraint that fails mid-output (the engine reports a GrammarError) is a 400 too, not a 500, and in a
    stream an error event, then [DONE]."""
    core = server.app.state.xllm.core
    steps = core.num_steps
    s, b = _post(server, "/v1/completions", {"prompt": "hi", "max_tokens": 3, "guided_regex": "a{1000}{1000}"})
    assert (s, b["error"]["param"], b["error"]["message"]) == (400, "guided_regex", "guided_regex: structured_outputs.regex: lexer error: too many expressions constructed"), b
    assert core.num_steps == steps
    from xllm.grammar import Grammar, GrammarError
    def failing(self, token): raise GrammarError(f"structured_outputs.{self.kind}: lexer error: too many expressions constructed")
    monkeypatch.setattr(Grammar, "advance", failing)
    want = ("invalid_request_error", "structured_outputs", "structured_outputs: structured_outputs.regex: lexer error: too many expressions constructed")
    body = {"prompt": "hi", "max_tokens": 5, "structured_outputs": {"regex": "[a-z ]+"}}
    s, b = _post(server, "/v1/completions", body)
    assert s == 400 and (b["error"]["type"], b["error"]["param"], b["error"]["message"]) == want, b
    s, ev = _events(server, "/v1/completions", body)
    assert s == 200 and ev[-1] == "[DONE]" and (ev[-2]["error"]["type"], ev[-2]["error"]["param"], ev[-2]["error"]["message"]) == want, ev[-3:]
    s, b = _post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "tool_choice": "required",
                                                  "tools": [{"type": "function", "function": {"name": "f"}}]})
    assert s == 400 and b["error"]["param"] == "tools", b          # the tools' own constraint (tool_choice required) names tools


def test_json_nested_too_deeply_is_refused(server, llm, monkeypatch):
    """JSON nested deeper than Python's parser goes (a RecursionError there) is a 400 naming the field, not a 500: a tool call's
    arguments in the history, the template's walk of them (a template that takes tool calls as data), guided_json and
    structured_outputs.json (the latter two are read by `StructuredOutputsParams`, notebook 08)."""
    msgs = lambda args: [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
                         "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": args}}]}]
    tools = [{"type": "function", "function": {"name": "f"}}]
    s, b = _post(server, "/v1/chat/completions", {"messages": msgs("[" * 1200 + "]" * 1200), "tools": tools, "max_tokens": 1})
    assert (s, b["error"]["param"], b["error"]["message"]) == (400, "messages", "messages[1].tool_calls[0].function.arguments: JSON nested too deeply to read"), b
    hermes = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% for c in m.tool_calls or [] %}<tool_call>{{ {'name': c.function.name, "
              "'arguments': c.function.arguments} | tojson }}</tool_call>{% endfor %}</{{ m.role }}>{% endfor %}")
    monkeypatch.setattr(llm.tokenizer, "chat_template", hermes)       # a model whose template takes the arguments as data
    s, b = _post(server, "/v1/chat/completions", {"messages": msgs('{"a": ' + "[" * 700 + "]" * 700 + "}"), "tools": tools, "max_tokens": 1})
    assert s == 400 and b["error"]["param"] == "messages", b
    monkeypatch.undo()
    deep = '{"a":' * 1000 + "1" + "}" * 1000
    for body, param in (({"guided_json": deep}, "guided_json"), ({"structured_outputs": {"json": deep}}, "structured_outputs")):
        s, b = _post(server, "/v1/completions", {"prompt": "hi", "max_tokens": 1, **body})
        assert s == 400 and b["error"]["param"] == param, (param, s, b)


@pytest.mark.parametrize("seed, status", [(2**63, 400), (-(2**63) - 1, 400), (2**70, 400), (2**63 - 1, 200), (-(2**63), 200)])
def test_seed_is_a_signed_64_bit_integer(server, seed, status):
    "vLLM's range for `seed`: a signed 64-bit integer; outside it a 400 naming seed."
    s, b = _post(server, "/v1/completions", {"prompt": "Once", "max_tokens": 1, "seed": seed})
    assert s == status and (s == 200 or b["error"]["param"] == "seed"), b


@pytest.mark.parametrize("field, value", [("temperature", True), ("top_p", False), ("max_tokens", 2.0), ("n", "2"), ("ignore_eos", 1),
                                          ("seed", 1.5), ("logprobs", True), ("stream", "yes"), ("presence_penalty", "0")])
def test_types_are_strict(server, field, value):
    s, b = _post(server, "/v1/completions", {"prompt": "Once", "max_tokens": 1, field: value})
    assert s == 400 and b["error"]["param"] == field, b


def test_stalled_stream_is_aborted(llm, monkeypatch):
    """A client that sends a streaming request and never reads: once the socket buffers are full, a chunk waits `stall_timeout`
    (1 s here) and the stream is aborted, its blocks freed, long before its 4 x 450 tokens would be done (>= 9 s of steps)."""
    srv = start_server(llm, stall_timeout=1)
    try:
        st = srv.app.state.xllm
        core = slow_down(srv, monkeypatch)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)              # a reader that holds little and reads nothing
        s.connect((srv.host, srv.port))
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 450, "n": 4, "logprobs": 5, "ignore_eos": True, "stream": True}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        before = core.num_batched_tokens
        stalls = lambda: st.stalled + st.counts.send_stalls    # the stream's own send timer, or the connection sweep, whichever sees it first
        wait_for(lambda: stalls() >= 1, 60, "the stalled stream to be aborted")
        wait_for(lambda: core.num_unfinished == 0 and core.block_manager.num_used_blocks == 0 and st.in_flight == 0, 30, "its blocks to be freed")
        assert core.num_batched_tokens - before < 4 * 450, "the stream ran to its end"
        s.close()
        time.sleep(1.5); seen = stalls()
        c = http.client.HTTPConnection(srv.host, srv.port, timeout=60)       # a reader is served as before
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "Once", "max_tokens": 5, "stream": True}), headers={"Content-Type": "application/json"})
        assert c.getresponse().read().decode().rstrip().endswith("data: [DONE]") and stalls() == seen
    finally: srv.stop()


def test_openapi_describes_what_is_answered(server, llm):
    "400 (never 422), 413 and 503 documented as OpenAI's error JSON, SSE beside JSON; no /docs unless asked (its scripts come from a CDN)."
    with urllib.request.urlopen(server.url + "/openapi.json", timeout=30) as r: spec = json.loads(r.read())
    assert "422" not in json.dumps(spec) and "HTTPValidationError" not in json.dumps(spec)
    for path in ("/v1/completions", "/v1/chat/completions"):
        r = spec["paths"][path]["post"]["responses"]
        assert {"200", "400", "413", "503"} <= set(r) and set(r["200"]["content"]) == {"application/json", "text/event-stream"}, r
        assert r["400"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    props = spec["components"]["schemas"]["CompletionRequest"]["properties"]
    assert "boolean" not in json.dumps(props["temperature"]) and "number" in json.dumps(props["temperature"])
    with pytest.raises(urllib.error.HTTPError) as e: urllib.request.urlopen(server.url + "/docs", timeout=30)
    assert e.value.code == 404
    keyed = start_server(llm, api_key="k", docs=True)
    try:
        with pytest.raises(urllib.error.HTTPError) as e: urllib.request.urlopen(keyed.url + "/openapi.json", timeout=30)
        assert e.value.code == 401                                                    # the schema, like every path but /health, needs the key
        auth = {"Authorization": "Bearer k"}
        with urllib.request.urlopen(urllib.request.Request(keyed.url + "/docs", headers=auth), timeout=30) as r: assert r.status == 200
        with urllib.request.urlopen(urllib.request.Request(keyed.url + "/openapi.json", headers=auth), timeout=30) as r: spec = json.loads(r.read())
        assert "401" in spec["paths"]["/v1/models"]["get"]["responses"] and "401" not in spec["paths"]["/health"]["get"]["responses"]
        assert "401" in spec["paths"]["/tokenize"]["post"]["responses"] and "401" in spec["paths"]["/metrics"]["get"]["responses"]
    finally: keyed.stop()


_SERVE = r"""
import sys, time
import xllm.server as xs
from xllm.llm import LLM
orig = xs.create_app
def create(*a, **k):                                   # every engine step 50 ms: a 450-token stream lasts >= 22 s
    app = orig(*a, **k); core = app.state.xllm.core; step = core.step
    def slow(): time.sleep(0.05); return step()
    core.step = slow
    return app
xs.create_app = create
xs.serve(llm=LLM(sys.argv[1]), host=sys.argv[2], port=int(sys.argv[3]), shutdown_timeout=float(sys.argv[4]))
"""


class _Served:
    "`xllm.server.serve` in a subprocess on the stand-in model (engine steps slowed to 50 ms) on a port taken as it binds, stdout and stderr collected."
    def __init__(self, model_dir, tmp, shutdown_timeout, host="127.0.0.1"):
        from xllm.server import launch
        (tmp / "serve.py").write_text(_SERVE)
        self.p, url = launch([sys.executable, str(tmp / "serve.py"), str(model_dir), host, "0", str(shutdown_timeout)], timeout=120,
                             env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.port = int(url.rsplit(":", 1)[1])
    def stream(self, max_tokens, out: list):
        "A streaming completion in a thread; `out` gets the event lines it received and whether [DONE] came."
        def run():
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            c.request("POST", "/v1/completions", body=json.dumps({"prompt": "Once", "max_tokens": max_tokens, "ignore_eos": True, "stream": True}),
                      headers={"Content-Type": "application/json"})
            r, lines = c.getresponse(), []
            try:
                for line in r: lines.append(line.decode().strip()); out.append(lines[-1])
            except (OSError, http.client.HTTPException): pass
        t = threading.Thread(target=run, daemon=True); t.start()
        wait_for(lambda: len(out) >= 2, 60, "the stream to start")
        return t
    def stop(self, *signals, gap=0.5):
        "Send `signals` (gap seconds apart); returns (seconds from the first to the exit, return code, stdout, stderr)."
        t0 = time.time()
        for k, sig in enumerate(signals):
            if k: time.sleep(gap)
            self.p.send_signal(sig)
        self.p.wait(timeout=120)
        took = time.time() - t0
        for t in self.p.readers: t.join(10)
        return took, self.p.returncode, "".join(self.p.out), "".join(self.p.err)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_shutdown_is_bounded(model_dir, tmp_path, sig):
    """A signal with a long stream running (SIGHUP, a closed terminal, as SIGTERM): the server stops after shutdown_timeout (2 s),
    not when the stream would end (>= 22 s); the app's shutdown ran."""
    srv = _Served(model_dir, tmp_path, 2, host="0.0.0.0")
    lines = []
    t = srv.stream(450, lines)
    took, rc, out, err = srv.stop(sig)
    t.join(30)
    assert 1.5 < took < 15, (took, rc, out, err[-3000:])
    assert rc in (0, -sig, 128 + sig, -signal.SIGTERM) and "xllm: stopped" in out, (rc, out, err[-3000:])
    assert "data: [DONE]" not in lines and len([l for l in lines if l]) < 450  # cut short
    assert "beyond this machine, with no API key" in err                          # 0.0.0.0 without a key: warned


def test_shutdown_lets_short_requests_finish(model_dir, tmp_path):
    "SIGTERM while a 30-token stream runs (>= 1.5 s of steps): it is answered whole (to its max_tokens), then the server exits, well before the 20 s timeout."
    srv = _Served(model_dir, tmp_path, 20)
    lines = []
    t = srv.stream(30, lines)
    took, rc, out, err = srv.stop(signal.SIGTERM)
    t.join(30)
    events = [l for l in lines if l]
    assert events[-1] == "data: [DONE]" and json.loads(events[-2][6:])["choices"][0]["finish_reason"] == "length", events[-3:]   # all 30
    assert took < 15 and "xllm: stopped (0 requests were unfinished)" in out, (took, out, err[-3000:])


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_second_signal_exits_at_once(model_dir, tmp_path, second):
    "SIGTERM, then SIGTERM or SIGINT 0.5 s later: out at once (not after the 60 s timeout), the app's shutdown run all the same."
    srv = _Served(model_dir, tmp_path, 60)
    lines = []
    t = srv.stream(450, lines)
    took, rc, out, err = srv.stop(signal.SIGTERM, second)
    t.join(30)
    assert took < 10 and "xllm: stopped" in out, (took, out, err[-3000:])


def test_loopback_names():
    assert _loopback("127.0.0.1") and _loopback("localhost") and _loopback("::1") and _loopback("127.8.9.10")
    assert not _loopback("0.0.0.0") and not _loopback("192.0.2.1") and not _loopback("::") and not _loopback("example.org")


def _token_gaps(srv, body):
    "Stream a completion; the gaps (s) between the arrivals of its events, largest first."
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
    c.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}), headers={"Content-Type": "application/json"})
    r, times = c.getresponse(), []
    while (line := r.fp.readline()):
        if line.startswith(b"data: "): times.append(time.perf_counter())
        if line.startswith(b"data: [DONE]"): break
    c.close()
    return sorted((b - a for a, b in zip(times, times[1:])), reverse=True)


def test_slow_templates_do_not_stall_other_streams(server, llm, monkeypatch):
    """Chat templates render in worker processes: while four chat requests render templates that take their whole CPU budget (two
    legal and slow, answered 200; two refused at the limit, a 400), an unrelated completion stream keeps producing tokens, its largest
    gap under max(100 ms, 3x its largest gap without that load, same run). (Rendered in the server's process, behind its GIL, such
    renders once stretched a stream's gaps from 6 ms to 583 ms.)"""
    import xllm.chat as chat
    slow_down(server, monkeypatch, 0.01)
    body = {"prompt": "Once upon a time", "max_tokens": 250, "ignore_eos": True, "temperature": 0}
    quiet = _token_gaps(server, body)[0]
    monkeypatch.setattr(chat, "MAX_RENDER_SECONDS", 1.0)
    loops = "{% for i in range(N) %}{% for j in range(N) %}{% endfor %}{% endfor %}"
    n = 1000                                                     # a legal render: ~0.3 s of CPU on this machine
    while n < 9000:
        t0 = time.process_time(); chat.ChatTemplate(loops.replace("N", str(n)), in_process=True).render([{"role": "user", "content": "x"}])
        if time.process_time() - t0 > 0.3: break
        n = int(n * 1.3)
    # one template for all four: a message asking for 'forever' loops until the CPU limit stops it
    monkeypatch.setattr(llm.tokenizer, "chat_template", "{% set t = messages[0].content %}{% if t == 'forever' %}" + loops.replace("N", "9999")
                        + "{% else %}" + loops.replace("N", str(n)) + "{% endif %}<|im_start|>user\n{{ t }}<|im_end|>\n", raising=False)
    statuses = []
    def one(text): statuses.append(_post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": text}], "max_tokens": 1}))
    load = [threading.Thread(target=one, args=(t,)) for t in ("slow", "forever", "slow", "forever")]
    for t in load: t.start()
    time.sleep(0.2)                                              # the renders are under way
    busy = _token_gaps(server, body)[0]
    for t in load: t.join(120)
    assert sorted(s for s, _ in statuses) == [200, 200, 400, 400], statuses
    assert all("exceeds its limits" in json.dumps(b) for s, b in statuses if s == 400), statuses
    print(f"largest gap between tokens: {quiet * 1e3:.0f} ms quiet, {busy * 1e3:.0f} ms while the templates render (n = {n})")
    assert busy < max(0.100, 3 * quiet), (busy, quiet)
