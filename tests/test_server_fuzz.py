"""A bounded schemathesis run against the OpenAI-compatible server (issue 22): at least 2,000 cases generated from the server's own
/openapi.json and sent in-process to its ASGI app (no socket; streams included), on a one-layer model with a 48-token context, must
all pass `not_a_server_error` (no 5xx), `status_code_conformance`, `content_type_conformance` and `response_schema_conformance`.
Three phases: hand-written hostile cases, schemathesis' coverage phase (boundary and wrong-type values for every field, unexpected
methods) and hypothesis fuzzing of every operation, positive and negative, with fixed seeds. Failures are collected by class
(operation, status, check) and reported together, each with the smallest body that showed it and a curl line to reproduce it.
Written against schemathesis 4.32 (its 4.x Python API: `openapi.from_asgi`, `APIOperation.as_strategy`/`Case`,
`BaseSchema.iter_coverage_cases`, `Case.call` + `Case.validate_response`); it does not need schemathesis' pytest plugin."""
import gc, json, time, zlib
import pytest
import torch

schemathesis = pytest.importorskip("schemathesis", minversion="4.0")
pytest.importorskip("fastapi"); pytest.importorskip("sentencepiece")
import schemathesis.checks   # noqa: F811 (the submodule, after importorskip gave the package)
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from xllm.stand_ins import stand_in_model
from xllm.llm import LLM
from xllm.server import create_app

KEY = "fuzz-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
CONTEXT = 48          # tokens per request: a generated request costs at most 48 positions of a 1-layer, 64-wide model
MIN_CASES = 2000
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance")
# hypothesis examples per operation and generation mode (positive, negative). An operation without parameters has one case and
# none that is invalid; any string is a valid model id. A chat body costs about three times as much to generate as a completions
# body (its free-form `Any` fields) and most answers are 400s, so completions get most of the budget: with the coverage phase
# (about 700 cases) and the explicit cases the run sends about 2,100 requests in about 35 s of one CPU core.
EXAMPLES = {"GET /health": (1, 0), "GET /version": (1, 0), "GET /v1/models": (1, 0), "GET /v1/models/{model_id}": (200, 0), "POST /v1/completions": (600, 250),
            "POST /v1/chat/completions": (200, 100), "POST /tokenize": (150, 60), "POST /detokenize": (100, 40), "GET /metrics": (1, 0), "GET /get_load": (1, 0),
            "GET /tokenizer_info": (1, 0), "POST /v1/embeddings": (120, 50), "POST /pooling": (40, 15), "POST /v1/score": (40, 15),
            "POST /v1/rerank": (60, 25), "POST /rerank": (20, 10),   # the pooling endpoints (#45)
            "POST /v1/messages": (120, 60), "POST /v1/messages/count_tokens": (60, 30),
            "POST /v1/responses": (120, 60), "GET /v1/responses/{response_id}": (30, 0), "DELETE /v1/responses/{response_id}": (30, 0),
            "POST /v1/load_lora_adapter": (40, 20), "POST /v1/unload_lora_adapter": (40, 20)}
TIMEOUT = 30          # seconds one request may take (in-process; a hang fails the case instead of the run)
ROLES = ("user", "assistant")

# Hand-written cases, sent before the generated ones: inputs the generator does not produce (lone surrogates, which schemathesis
# never draws; bodies that are not JSON; no API key) and values that broke the server before. (path, JSON body or raw bytes, headers)
_M = lambda c="hi", **kw: {"messages": [{"role": "user", "content": c}], "max_tokens": 3, **kw}
EXPLICIT = [
    ("/v1/completions", {"prompt": "\ud800"}, AUTH),
    ("/v1/completions", {"prompt": "hi", "stop": "\udfff", "max_tokens": 2}, AUTH),
    ("/v1/completions", {"prompt": "hi", "logit_bias": {"\ud800": 1}}, AUTH),
    ("/v1/completions", {"prompt": ["\ud800", "hi"], "echo": True, "max_tokens": 1}, AUTH),
    ("/v1/completions", {"prompt": "hi", "temperature": True}, AUTH),
    ("/v1/completions", {"prompt": "hi", "max_tokens": True}, AUTH),
    ("/v1/completions", {"prompt": "hi", "n": True}, AUTH),
    ("/v1/completions", {"prompt": [True, 5]}, AUTH),
    ("/v1/completions", b'{"prompt": "hi", "temperature": NaN}', AUTH),             # not JSON, but Python's json module reads them
    ("/v1/completions", b'{"prompt": "hi", "top_p": Infinity}', AUTH),
    ("/v1/completions", b'{"prompt": "hi", "logit_bias": {"5": -Infinity}}', AUTH),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "presence_penalty": NaN, "max_tokens": 2}', AUTH),
    ("/v1/completions", {"prompt": "hi", "logprobs": 20, "max_tokens": 4, "top_k": 1}, AUTH),
    ("/v1/completions", {"prompt": "hi", "logprobs": 20, "max_tokens": 4, "top_p": 0.01, "stream": True}, AUTH),
    ("/v1/completions", {"prompt": "hi", "logprobs": 5, "max_tokens": 4, "logit_bias": {"5": -100, "6": 100}}, AUTH),
    ("/v1/completions", {"prompt": [5], "logprobs": 3, "max_tokens": 4, "min_p": 1}, AUTH),
    ("/v1/completions", {"prompt": [5, 6, 7], "echo": True, "logprobs": 20, "max_tokens": 0}, AUTH),
    ("/v1/completions", {"prompt": "hi", "model": "not-served"}, AUTH),                # 404 model_not_found, documented
    ("/v1/messages", _M(), AUTH),                                                       # the agents' APIs (issue 46)
    ("/v1/messages", _M(stream=True), AUTH),
    ("/v1/messages", _M([{"type": "text", "text": "\ud800"}], system="\udfff"), AUTH),
    ("/v1/messages", {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"a": [[[[1]]]]}}]},
                                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}], "max_tokens": 2,
                      "tools": [{"name": "f", "input_schema": {"type": "object"}}]}, AUTH),
    ("/v1/messages", _M(model="not-served"), AUTH),
    ("/v1/messages", _M(), {"x-api-key": "wrong"}),
    ("/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "hi"}]}, {"x-api-key": KEY}),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 3}, AUTH),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 3, "stream": True}, AUTH),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 3, "previous_response_id": "resp_nope"}, AUTH),
    ("/v1/responses", {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{"}, {"type": "function_call_output", "call_id": "c", "output": "1"}],
                       "max_output_tokens": 3, "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}, AUTH),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 3, "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}}, AUTH),
    ("/v1/responses", {"input": "hi", "truncation": "auto"}, AUTH),
    ("/v1/chat/completions", _M(model="not-served"), AUTH),
    ("/tokenize", {"prompt": "hi", "model": ""}, AUTH),
    ("/v1/completions", {"prompt": ["\ud800", "hi"], "echo": True, "logprobs": 0, "max_tokens": 0, "n": 2, "stream": True}, AUTH),
    ("/v1/completions", {"prompt": "hi", "echo": True, "logprobs": 1, "max_tokens": 2, "logit_bias": {"5": -100}}, AUTH),
    ("/v1/chat/completions", _M(logprobs=True, top_logprobs=20, top_k=1), AUTH),
    ("/v1/chat/completions", _M(logprobs=True, top_logprobs=20, top_p=0.01, stream=True), AUTH),
    ("/v1/chat/completions", _M("\udc80"), AUTH),
    ("/v1/chat/completions", {"messages": [{"role": "\ud800", "content": "x"}]}, AUTH),
    ("/v1/chat/completions", _M(stop=["\ud800"]), AUTH),
    ("/v1/completions", b"\xff\xfe{", AUTH),
    ("/v1/completions", b'{"prompt": "hi"', AUTH),
    ("/v1/completions", b"[]", AUTH),
    ("/v1/completions", b'{"prompt": "\\ud800\\u0000"}', AUTH),
    ("/v1/completions", {"prompt": "hi"}, {}),                                      # no key: 401
    ("/v1/chat/completions", _M(), {"Authorization": "Bearer wrong"}),
]


def _tiny_model(dest):
    "`stand_in_model`'s checkpoint cut to its first layer and a context of CONTEXT tokens: a decode step costs about a quarter as much."
    from safetensors.torch import load_file, save_file
    dest = stand_in_model(dest)
    cfg = json.loads((dest / "config.json").read_text())
    (dest / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 1, "max_position_embeddings": CONTEXT}))
    sd = load_file(str(dest / "model.safetensors"))
    save_file({k: v for k, v in sd.items() if not k.startswith("model.layers.") or k.split(".")[2] == "0"}, str(dest / "model.safetensors"))
    return dest


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # before the engine thread starts: a 64-wide model's ops are too small to share, and on a
    try:                            # loaded machine two spinning threads cost more than they gain
        llm = LLM(_tiny_model(tmp_path_factory.mktemp("fuzz-model")), max_num_seqs=4)
        assert llm.max_model_len == CONTEXT
        yield create_app(llm, api_key=KEY, max_waiting=4)    # n above 8 is a 400, so no request runs long
    finally: torch.set_num_threads(threads)


# What schemathesis' `generation.hypothesis.setup()` patches in hypothesis, for good, the first time it builds a strategy: a printer
# that prints nothing (a falsifying example then reads `x=,`) and a larger buffer, among others.
_HYPOTHESIS_GLOBALS = [("hypothesis.core", "RepresentationPrinter"), ("hypothesis.core", "BUFFER_SIZE"),
                       ("hypothesis.internal.conjecture.engine", "BUFFER_SIZE"), ("hypothesis.strategies._internal.collections", "BUFFER_SIZE"),
                       ("hypothesis.strategies._internal.core", "is_first_param_referenced_in_function"),
                       ("hypothesis.internal.entropy", "register_random")]


@pytest.fixture
def hypothesis_restored():
    """Put hypothesis' globals back as they were before this test once it ends, so that the other hypothesis tests of the session
    still print their falsifying examples. (schemathesis' pytest plugin patches them when it loads: run pytest with
    `-p no:schemathesis`, which this test does not need, to keep them whole for the whole session.)"""
    import importlib
    from schemathesis.generation import hypothesis as sh
    mods = {m: importlib.import_module(m) for m, _ in _HYPOTHESIS_GLOBALS}
    saved = [(mods[m], a, getattr(mods[m], a)) for m, a in _HYPOTHESIS_GLOBALS if hasattr(mods[m], a)]
    was_patched = getattr(sh.setup, "_is_patched", False)
    yield
    for mod, a, v in saved: setattr(mod, a, v)
    sh.setup._is_patched = was_patched


def _conversational(body, roles=ROLES, text="hi"):
    """`body` (a chat request) with its messages' roles replaced by alternating user/assistant turns and any content that is not a
    string by `text`; None if it has no message object to change. `role` is any string in the schema, so without this almost every
    generated chat case stops at the 400 for its role and never reaches the chat template or the engine."""
    msgs = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(msgs, list) or not any(isinstance(m, dict) for m in msgs): return None
    body = {**body, "messages": [{**m, "role": roles[i % 2], "content": m["content"] if isinstance(m.get("content"), str) else text}
                                 if isinstance(m, dict) else m for i, m in enumerate(msgs)]}
    return body


def _key(label, status, failure):
    return (label, status, getattr(failure, "code", type(failure).__name__), getattr(failure, "title", str(failure)[:80]))


def _curl(case):
    try: return case.as_curl_command(headers=AUTH)
    except Exception as e: return f"(no curl line: {e})"


def _size(b):
    try: return len(json.dumps(b)) if not isinstance(b, bytes) else len(b)
    except Exception: return 1 << 30


def test_schemathesis_no_5xx_no_schema_violation(app, hypothesis_restored):
    config = schemathesis.Config.from_dict({"output": {"sanitization": {"enabled": False}}})   # else max_tokens reads [Filtered]
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config, headers=AUTH)   # the schema, as every path but /health, needs the key
    checks = [getattr(schemathesis.checks, name) for name in CHECKS]
    failures, counts, times, statuses, h = {}, {}, {}, {}, None   # class -> (case, body, answer, message); (phase, label, mode) -> n

    def send(case, phase, label, mode, headers=AUTH, raw=None):
        "Send `case` (`raw`: bytes sent as its body instead), validate the answer, record any failure under its class."
        counts[phase, label, mode] = counts.get((phase, label, mode), 0) + 1
        kw = {"headers": headers, "timeout": TIMEOUT, **({"data": raw} if raw is not None else {})}
        body = raw if raw is not None else case.body
        def record(k, text, message):
            if k not in failures or _size(body) < _size(failures[k][1]): failures[k] = (case, body, text, message)
        try: resp = case.call(**kw)
        except Exception as e:         # an unhandled exception in the app: in-process it propagates (uvicorn would answer 500)
            return record((label, 500, "raised", f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]}"), "", repr(e)[:500])
        statuses.setdefault(label, {}).setdefault(resp.status_code, 0); statuses[label][resp.status_code] += 1
        try: case.validate_response(resp, checks=checks, headers=headers)
        except BaseExceptionGroup as g:
            for f in g.exceptions: record(_key(label, resp.status_code, f), resp.text[:300], getattr(f, "message", str(f))[:300])

    def timed(key, fn):
        t1 = time.perf_counter(); fn(); times[key] = times.get(key, 0) + time.perf_counter() - t1

    t0, c0 = time.perf_counter(), time.process_time()
    try:
        ops = {f"{op.method.upper()} {op.path}": op for op in (r.ok() for r in schema.get_all_operations())}
        assert set(ops) == set(EXAMPLES), f"the server's operations changed: {sorted(ops)}; give each a budget in EXAMPLES"
        CHAT, MSGS = "POST /v1/chat/completions", "POST /v1/messages"

        def explicit():
            for path, body, headers in EXPLICIT:
                label = f"POST {path}"
                case = ops[label].Case(body=body if not isinstance(body, bytes) else {}, media_type="application/json")
                send(case, "explicit", label, "-", headers, raw=body if isinstance(body, bytes) else None)
        timed("explicit", explicit)

        def coverage(label, op, mode):   # schemathesis' deterministic boundary values, wrong types and unexpected methods
            config = schema.config.generation_for(operation=op, phase="coverage")
            for case in schema.iter_coverage_cases(op, generation_modes=[mode], generation_config=config):
                send(case, "coverage", label, mode.value)
                if label in (CHAT, MSGS) and mode is GenerationMode.POSITIVE and (b := _conversational(case.body)) is not None:
                    send(op.Case(body=b, media_type=case.media_type), "coverage", label, "positive, as a conversation")

        def fuzz(label, op, mode, n):
            chat = label in (CHAT, MSGS) and mode is GenerationMode.POSITIVE
            @seed(zlib.crc32(f"{label} {mode.value}".encode()))
            @settings(max_examples=n, deadline=None, database=None, derandomize=False, print_blob=False,
                      phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode), data=st.data())
            def run(case, data):
                if chat and data.draw(st.booleans()):     # half the chat cases as conversations the template takes
                    b = _conversational(case.body, data.draw(st.sampled_from([ROLES, ROLES[::-1]])), data.draw(st.text(max_size=12)))
                    if b is not None: case.body = b
                send(case, "fuzz", label, mode.value)
            try: run()
            except Unsatisfiable:         # nothing to make invalid (e.g. an operation without parameters in negative mode)
                if counts.get(("fuzz", label, mode.value)): raise

        for label, op in sorted(ops.items()):
            for mode, n in zip((GenerationMode.POSITIVE, GenerationMode.NEGATIVE), EXAMPLES[label]):
                timed(f"coverage {label} {mode.value}", lambda: coverage(label, op, mode))
                if n: timed(f"fuzz {label} {mode.value}", lambda: fuzz(label, op, mode, n))
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0

        # every engine request ended and gave its blocks back (streams that schemathesis cut short included)
        health, deadline = ops["GET /health"].Case(), time.time() + 30
        while True:
            gc.collect()
            h = health.call(timeout=TIMEOUT, headers=AUTH).json()          # with the key: the counts
            if h["in_flight"] == h["unfinished"] == h["used_blocks"] == 0 or time.time() > deadline: break
            time.sleep(0.05)
    finally:
        try:
            from schemathesis.python.asgi import shutdown_lifespans
            shutdown_lifespans()        # the app's lifespan (started by schemathesis' first request) stops the engine thread
        finally: app.state.xllm.engine.shutdown(10)
    st_ = app.state.xllm

    total = sum(counts.values())
    by_phase = {p: sum(v for k, v in counts.items() if k[0] == p) for p in ("explicit", "coverage", "fuzz")}
    print(f"\nschemathesis: {total} cases {by_phase} in {elapsed:.1f} s ({cpu:.1f} s CPU)\n  " +
          "\n  ".join(f"{' '.join(k)}: {v}" for k, v in sorted(counts.items())) + "\n  answers: " +
          "; ".join(f"{k} {dict(sorted(v.items()))}" for k, v in sorted(statuses.items())) + "\n  " +
          "\n  ".join(f"{k}: {v:.1f} s" for k, v in sorted(times.items(), key=lambda x: -x[1])[:8]))
    report = "\n\n".join(f"[{k[1]}] {k[0]}: {k[2]} {k[3]}\n  body: {b!r}"[:700] + f"\n  answered: {t!r}\n  {m}\n  {_curl(c)}"
                         for k, (c, b, t, m) in sorted(failures.items(), key=str))
    assert not failures, f"{len(failures)} failure classes in {total} cases:\n\n{report}"
    assert total >= MIN_CASES, f"only {total} cases were sent: {counts}"
    assert h["in_flight"] == h["unfinished"] == h["used_blocks"] == 0, f"the server did not drain: {h}"
    assert not st_.engine._thread.is_alive(), "the engine thread did not stop"
    st_.core.block_manager.check_invariants()
    assert st_.core.block_manager.num_used_blocks == 0
