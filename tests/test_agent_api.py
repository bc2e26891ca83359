"""The APIs agents speak (issue #46): reasoning content (`--reasoning-parser`), `chat_template_kwargs`, and Anthropic's Messages
(`/v1/messages`, `/v1/messages/count_tokens`) driven by the official `anthropic` client, on a stand-in model whose chat template
opens `<think>` when asked (`enable_thinking`). Greedy text is compared with the chat-completions endpoint's for the same
conversation; the reasoning split with an independent regular expression."""
import json, re, urllib.request, urllib.error
import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")

from xllm.stand_ins import stand_in_model
from xllm.llm import LLM
from xllm.reasoning import reasoning_parser
from xllm.server import start_server

KEY = "test-key"
TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] if m['content'] is string else '' }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant:{% if enable_thinking is defined and enable_thinking %}<think>{% endif %}{% endif %}")
WEATHER = {"name": "get_weather",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"], "additionalProperties": False}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = stand_in_model(tmp_path_factory.mktemp("think"))
    (d / "chat_template.jinja").write_text(TEMPLATE)
    srv = start_server(LLM(d), api_key=KEY, model_name="m", reasoning_parser="qwen3")
    yield srv
    srv.stop()


@pytest.fixture
def deepseek(server):
    "The server's parser switched to deepseek_r1 (the output starts inside the reasoning) for one test."
    st = server.app.state.xllm
    st.reasoning = reasoning_parser("deepseek_r1")
    yield server
    st.reasoning = reasoning_parser("qwen3")


@pytest.fixture(scope="module")
def oa(server): return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def an(server): return anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0, timeout=60)


def _raw(server, path, body, headers=None):
    "POST `body` with urllib (x-api-key unless `headers`); (status, parsed JSON)."
    h = {"Content-Type": "application/json", **(headers if headers is not None else {"x-api-key": KEY})}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(server.url + path, data=data, headers=h, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r: return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read())


RX = r"<think>[a-z]{1,8}</think>[a-z]{1,8}"


@pytest.mark.parametrize("stream", [False, True])
def test_chat_reasoning_split(oa, stream):
    "qwen3: an answer forced (structured outputs) to hold a <think> section is split as a regex splits it, streamed or not."
    kw = dict(model="m", messages=[{"role": "user", "content": "Think, then answer."}], max_tokens=40, temperature=0.9, seed=3,
              extra_body={"structured_outputs": {"regex": RX}})
    if not stream:
        m = oa.chat.completions.create(**kw).choices[0].message
        r, c = m.model_extra["reasoning_content"], m.content
    else:
        r = c = ""
        for ch in oa.chat.completions.create(stream=True, **kw):
            if ch.choices:
                r += (ch.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                c += ch.choices[0].delta.content or ""
    whole = re.fullmatch(r"<think>([a-z]{1,8})</think>([a-z]{1,8})", f"<think>{r}</think>{c}")
    assert whole and (r, c) == whole.groups(), (r, c)


def test_chat_without_tags_and_template_kwargs(oa, an):
    "qwen3 with no <think> in the answer: all content, reasoning_content null; enable_thinking reaches the template."
    msgs = [{"role": "user", "content": "Tell me a story"}]
    m = oa.chat.completions.create(model="m", messages=msgs, max_tokens=12, temperature=0).choices[0].message
    assert m.model_extra["reasoning_content"] is None and m.content
    plain = an.messages.count_tokens(model="m", messages=msgs).input_tokens
    thinking = an.messages.count_tokens(model="m", messages=msgs, extra_body={"chat_template_kwargs": {"enable_thinking": True}}).input_tokens
    assert thinking > plain > 0
    assert an.messages.count_tokens(model="m", messages=msgs, thinking={"type": "enabled", "budget_tokens": 1024}).input_tokens == thinking
    effort = oa.responses.create(model="m", input=msgs, max_output_tokens=1, reasoning={"effort": "high"}, include=[], prompt_cache_key="k")
    assert effort.usage.input_tokens == thinking


@pytest.mark.parametrize("stream", [False, True])
def test_deepseek_thinking_everywhere(deepseek, oa, an, stream):
    """deepseek_r1: the prompt opens <think> (enable_thinking), so the whole answer is reasoning: chat's reasoning_content (or its
    deltas) equals the Messages thinking block (or its thinking_delta events), greedy."""
    msgs, kw = [{"role": "user", "content": "Why is the sky blue?"}], {"chat_template_kwargs": {"enable_thinking": True}}
    ref = oa.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0, extra_body=kw).choices[0].message
    assert ref.model_extra["reasoning_content"] and ref.content == ""
    if not stream:
        r = an.messages.create(model="m", messages=msgs, max_tokens=16, extra_body={**kw, "temperature": 0})
        assert [b.type for b in r.content] == ["thinking"] and r.stop_reason == "max_tokens"
        assert r.content[0].thinking == ref.model_extra["reasoning_content"]
    else:
        with an.messages.stream(model="m", messages=msgs, max_tokens=16, extra_body={**kw, "temperature": 0}) as s:
            got = "".join(e.delta.thinking for e in s if e.type == "content_block_delta" and e.delta.type == "thinking_delta")
            final = s.get_final_message()
        assert got == ref.model_extra["reasoning_content"] == final.content[0].thinking
    rkw = dict(model="m", input=msgs, max_output_tokens=16, temperature=0, extra_body=kw, include=["reasoning.encrypted_content"], store=False)
    if not stream: items = oa.responses.create(**rkw).output
    else:
        events = list(oa.responses.create(stream=True, **rkw))
        assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == ref.model_extra["reasoning_content"]
        items = events[-1].response.output
    assert [i.type for i in items] == ["reasoning"] and items[0].content[0].text == ref.model_extra["reasoning_content"]
    import base64                       # Codex's stateless round trip: the sealed reasoning item sent back with the next turn
    assert base64.b64decode(items[0].encrypted_content).decode() == ref.model_extra["reasoning_content"]
    back = oa.responses.create(model="m", input=msgs + [items[0].model_dump(exclude_none=True), {"role": "user", "content": "And at night?"}],
                               max_output_tokens=2, store=False, include=["reasoning.encrypted_content"])
    assert back.status in ("completed", "incomplete") and back.output


@pytest.mark.parametrize("stream", [False, True])
def test_messages_text_equals_chat(oa, an, stream):
    "Greedy Messages text (system + user) equals chat completions' for the same conversation; usage counts the same tokens."
    system, msgs = "You tell stories.", [{"role": "user", "content": "Once upon a time"}]
    ref = oa.chat.completions.create(model="m", messages=[{"role": "system", "content": system}] + msgs, max_tokens=20, temperature=0)
    if not stream:
        r = an.messages.create(model="m", system=system, messages=msgs, max_tokens=20, extra_body={"temperature": 0})
        text = "".join(b.text for b in r.content if b.type == "text")
    else:
        with an.messages.stream(model="m", system=system, messages=msgs, max_tokens=20, extra_body={"temperature": 0}) as s:
            text = "".join(s.text_stream)
            r = s.get_final_message()
    assert text == ref.choices[0].message.content
    assert (r.usage.input_tokens, r.usage.output_tokens) == (ref.usage.prompt_tokens, ref.usage.completion_tokens)
    assert r.stop_reason == {"length": "max_tokens", "stop": "end_turn"}[ref.choices[0].finish_reason]
    assert an.messages.count_tokens(model="m", system=system, messages=msgs).input_tokens == ref.usage.prompt_tokens


@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_round_trip(an, stream):
    "A named tool forced: one tool_use block with valid input; its tool_result sent back, the answer is text."
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    kw = dict(model="m", max_tokens=100, extra_body={"temperature": 0.7, "seed": 1}, tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather"})
    if not stream: r = an.messages.create(messages=msgs, **kw)
    else:
        with an.messages.stream(messages=msgs, **kw) as s: r = s.get_final_message()
    uses = [b for b in r.content if b.type == "tool_use"]
    assert r.stop_reason == "tool_use" and len(uses) == 1 and uses[0].name == "get_weather"
    assert set(uses[0].input) == {"city"} and isinstance(uses[0].input["city"], str) and len(uses[0].input["city"]) <= 12
    msgs += [{"role": "assistant", "content": [b.model_dump() for b in r.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny, 21 C"}]}]
    r2 = an.messages.create(model="m", max_tokens=10, extra_body={"temperature": 0}, tools=[WEATHER], tool_choice={"type": "none"}, messages=msgs)
    assert r2.stop_reason in ("end_turn", "max_tokens") and all(b.type == "text" for b in r2.content) and r2.content


def test_stop_sequences_and_errors(server, an):
    "stop_sequences cut the text; a missing max_tokens, an image block, a bad key: Anthropic's error shape, the field named."
    msgs = [{"role": "user", "content": "Tell me a story"}]
    full = "".join(b.text for b in an.messages.create(model="m", messages=msgs, max_tokens=20, extra_body={"temperature": 0}).content)
    word = full.split()[2]
    cut = an.messages.create(model="m", messages=msgs, max_tokens=20, extra_body={"temperature": 0}, stop_sequences=[word])
    assert cut.content[0].text == full[:full.index(word)] and (cut.stop_reason, cut.stop_sequence) == ("stop_sequence", word)
    with an.messages.stream(model="m", messages=msgs, max_tokens=20, extra_body={"temperature": 0}, stop_sequences=[word]) as st:
        final = st.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", word)
    for body, says in [({"messages": msgs}, "max_tokens"), ({"messages": [{"role": "user", "content": [{"type": "image"}]}], "max_tokens": 5}, "messages[0].content[0]"),
                       ({"messages": msgs, "max_tokens": 5, "temperature": 1.5}, "temperature"),
                       ({"messages": msgs, "max_tokens": 5, "tool_choice": {"type": "zap"}}, "tool_choice")]:
        status, err = _raw(server, "/v1/messages", body)
        assert status == 400 and err["type"] == "error" and err["error"]["type"] == "invalid_request_error" and says in err["error"]["message"], err
    status, err = _raw(server, "/v1/messages", {"messages": msgs, "max_tokens": 5}, headers={"x-api-key": "wrong"})
    assert status == 401 and err["error"]["type"] == "authentication_error"
    status, ok = _raw(server, "/v1/messages", {"messages": msgs, "max_tokens": 2}, headers={"Authorization": f"Bearer {KEY}", "anthropic-version": "2023-06-01"})
    assert status == 200 and ok["type"] == "message"
    with pytest.raises(anthropic.AuthenticationError): anthropic.Anthropic(base_url=server.url, api_key="nope", max_retries=0).messages.create(model="m", messages=msgs, max_tokens=2)


# OpenAI's Responses API, with the official client

FN = {"type": "function", "name": "get_weather", "parameters": WEATHER["input_schema"]}


@pytest.mark.parametrize("stream", [False, True])
def test_responses_text_equals_chat(oa, stream):
    "Greedy Responses text (instructions + input) equals chat completions'; usage the same tokens; streamed deltas join to it."
    ref = oa.chat.completions.create(model="m", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Once upon a time"}],
                                     max_tokens=20, temperature=0)
    kw = dict(model="m", instructions="Be brief.", input="Once upon a time", max_output_tokens=20, temperature=0)
    if not stream: r = oa.responses.create(**kw)
    else:
        events = list(oa.responses.create(stream=True, **kw))
        kinds = [e.type for e in events]
        assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"], kinds[:5]
        assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"], kinds[-5:]
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == ref.choices[0].message.content
        r = events[-1].response
    assert r.output_text == ref.choices[0].message.content
    assert (r.usage.input_tokens, r.usage.output_tokens) == (ref.usage.prompt_tokens, ref.usage.completion_tokens)
    assert r.status == ("incomplete" if ref.choices[0].finish_reason == "length" else "completed")


@pytest.mark.parametrize("stream", [False, True])
def test_responses_function_round_trip(oa, stream):
    "A forced function call, its output fed back through previous_response_id; GET and DELETE of the stored response."
    kw = dict(model="m", input="Weather in Paris?", tools=[FN], tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=100, temperature=0.7)
    if not stream: r = oa.responses.create(**kw)
    else:
        events = list(oa.responses.create(stream=True, **kw))
        assert "response.function_call_arguments.delta" in [e.type for e in events]
        r = events[-1].response
        assert [e.item.id for e in events if e.type == "response.output_item.done"] == [o.id for o in r.output]   # the items streamed are the response's
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and set(json.loads(calls[0].arguments)) == {"city"}
    r2 = oa.responses.create(model="m", previous_response_id=r.id, input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}],
                             tools=[FN], tool_choice="none", max_output_tokens=8, temperature=0)
    conv = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": calls[0].call_id, "type": "function", "function": {"name": "get_weather", "arguments": calls[0].arguments}}]},
            {"role": "tool", "tool_call_id": calls[0].call_id, "content": "sunny"}]
    ref = oa.chat.completions.create(model="m", messages=conv, tools=[{"type": "function", "function": {"name": "get_weather", "parameters": FN["parameters"]}}],
                                     tool_choice="none", max_tokens=8, temperature=0)
    assert r2.output[-1].type == "message" and r2.output_text == ref.choices[0].message.content and r2.usage.input_tokens == ref.usage.prompt_tokens
    assert oa.responses.retrieve(r.id).id == r.id
    oa.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError): oa.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError): oa.responses.create(model="m", previous_response_id=r.id, input="again", max_output_tokens=2)


def test_responses_parse_and_refusals(oa, server):
    "text.format json_schema through the structured-output path (responses.parse); unsupported fields refused by name."
    from pydantic import BaseModel, Field
    class Pet(BaseModel):
        name: str = Field(max_length=8)
        age: int = Field(ge=0, le=30)
    r = oa.responses.parse(model="m", input="A pet.", text_format=Pet, max_output_tokens=60, temperature=0.8)
    assert isinstance(r.output_parsed, Pet)
    for body, says in [({"input": "hi", "background": True}, "background"), ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0]"),
                       ({"input": [{"type": "image_generation_call"}]}, "input[0]"), ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
                       ({"input": "hi", "include": ["file_search_call.results"]}, "include")]:
        status, err = _raw(server, "/v1/responses", body, headers={"Authorization": f"Bearer {KEY}"})
        assert status == 400 and says in err["error"]["message"], err


# Hostile input on the new endpoints

def test_hostile_bodies(server):
    """Huge tool lists, deep nesting, more blocks than the context holds, wrong types: each a 400 in the endpoint's own error shape,
    quickly, and the server still answers after."""
    import time
    A, O = {"x-api-key": KEY}, {"Authorization": f"Bearer {KEY}"}
    deep = '{"a":' * 5000 + "{}" + "}" * 5000           # JSON text nested 5,000 deep (Python cannot dump such an object)
    many = [{"name": f"t{k}", "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}} for k in range(20000)]
    cases = [("/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "tools": many}, A, "messages"),
             ("/v1/messages", ('{"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": %s}]}], "max_tokens": 2}' % deep).encode(), A, ""),
             ("/v1/messages", {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}] * 5000}], "max_tokens": 2}, A, "messages"),
             ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}] * 5000, "max_tokens": 2}, A, "messages"),
             ("/v1/messages", {"messages": "hi", "max_tokens": 2}, A, "messages"),
             ("/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "x" * 200_000}]}, A, "messages"),
             ("/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": f"t{k}", "parameters": {"type": "object"}} for k in range(20000)]}, O, "messages"),
             ("/v1/responses", {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": deep}]}, O, ""),
             ("/v1/responses", {"input": [{"role": "user", "content": "a"}] * 5000}, O, ""),
             ("/v1/responses", {"input": {"role": "user"}}, O, "input")]
    for path, body, h, says in cases:
        t0 = time.monotonic()
        status, err = _raw(server, path, body, headers=h)
        assert status == 400 and time.monotonic() - t0 < 20, (path, status, str(err)[:300])
        msg = err["error"]["message"]
        assert (err.get("type") == "error") == path.startswith("/v1/messages") and says in msg, (path, err)
    assert _raw(server, "/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}, headers=A)[0] == 200


def test_stored_responses_are_bounded(server, oa):
    "The response store holds at most its count and bytes, the oldest dropped first: their ids are 404s after."
    store = server.app.state.xllm.response_store
    was = store.max_count, store.max_bytes
    try:
        store.max_count, store.max_bytes = 4, 3000          # each response here is about 1 kB of JSON: the bytes bound bites first
        ids = [oa.responses.create(model="m", input="the cat sat " * 20 + str(k), max_output_tokens=2, temperature=0).id for k in range(6)]
        assert 1 <= len(store.items) < 4 and store.bytes <= 3000 and store.bytes == sum(v[2] for v in store.items.values())
        assert list(store.items) == ids[-len(store.items):]
        with pytest.raises(openai.NotFoundError): oa.responses.retrieve(ids[0])
        assert oa.responses.retrieve(ids[-1]).id == ids[-1]
        store.max_bytes = 10_000
        more = [oa.responses.create(model="m", input=str(k), max_output_tokens=2, temperature=0).id for k in range(6)]
        assert list(store.items) == more[-4:]               # now the count bound
        store.max_bytes = 300
        big = oa.responses.create(model="m", input="hi", max_output_tokens=2, temperature=0)
        assert big.id not in store.items and list(store.items) == more[-4:]   # larger than all the bytes: answered, not kept
        nostore = oa.responses.create(model="m", input="z", max_output_tokens=2, temperature=0, store=False)
        assert nostore.id not in store.items
    finally: store.max_count, store.max_bytes = was


# End to end: `xllm serve` on the default model (SmolLM2-135M-Instruct), the official clients of both APIs

@pytest.fixture(scope="module")
def default_serve():
    "`xllm serve` on the default model in a subprocess (skipped where the model is not on this machine)."
    import sys
    from pathlib import Path
    from xllm.core import default_model_path
    from xllm.server import launch
    try: path = default_model_path(download=False)
    except (FileNotFoundError, OSError, ValueError) as e: pytest.skip(f"the default model is not here: {e}")
    p, url = launch([sys.executable, "-m", "xllm", "serve", "-m", str(path), "--port", "0", "--api-key", KEY, "--served-model-name", "smol"],
                    timeout=300, cwd=Path(__file__).resolve().parents[1])
    yield url
    p.terminate(); p.wait(60)
    for t in p.readers: t.join(10)


def test_default_model_end_to_end(default_serve):
    """On the default model: Messages (create, stream, count_tokens) and Responses (create, stream) give chat completions' greedy
    text for the same conversation; a function call's output fed back through previous_response_id; responses.parse."""
    from pydantic import BaseModel
    oa = openai.OpenAI(base_url=default_serve + "/v1", api_key=KEY, max_retries=0, timeout=120)
    an = anthropic.Anthropic(base_url=default_serve, api_key=KEY, max_retries=0, timeout=120)
    system, q = "You are a helpful assistant.", "What is the capital of France?"
    ref = oa.chat.completions.create(model="smol", messages=[{"role": "system", "content": system}, {"role": "user", "content": q}], max_tokens=24, temperature=0)
    text = ref.choices[0].message.content
    msgs, T0 = [{"role": "user", "content": q}], {"temperature": 0}
    m = an.messages.create(model="smol", system=system, messages=msgs, max_tokens=24, extra_body=T0)
    assert m.content[0].text == text and m.usage.input_tokens == ref.usage.prompt_tokens
    with an.messages.stream(model="smol", system=system, messages=msgs, max_tokens=24, extra_body=T0) as s: assert "".join(s.text_stream) == text
    assert an.messages.count_tokens(model="smol", system=system, messages=msgs).input_tokens == ref.usage.prompt_tokens
    r = oa.responses.create(model="smol", instructions=system, input=q, max_output_tokens=24, temperature=0)
    assert r.output_text == text
    ev = list(oa.responses.create(model="smol", instructions=system, input=q, max_output_tokens=24, temperature=0, stream=True))
    assert "".join(e.delta for e in ev if e.type == "response.output_text.delta") == text and ev[-1].type == "response.completed"
    fn = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                                                                     "required": ["city"], "additionalProperties": False}}
    c = oa.responses.create(model="smol", input="What is the weather in Paris?", tools=[fn], tool_choice="required", max_output_tokens=60, temperature=0)
    call = next(o for o in c.output if o.type == "function_call")
    assert call.name == "get_weather" and isinstance(json.loads(call.arguments)["city"], str)
    a = oa.responses.create(model="smol", previous_response_id=c.id, tools=[fn], max_output_tokens=24, temperature=0,
                            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}])
    assert a.output_text and a.usage.input_tokens > c.usage.input_tokens
    class City(BaseModel):
        name: str
        country: str
    p = oa.responses.parse(model="smol", input="Name a city in Europe as JSON.", text_format=City, max_output_tokens=60, temperature=0)
    assert isinstance(p.output_parsed, City)
    tu = an.messages.create(model="smol", messages=[{"role": "user", "content": "What is the weather in Paris?"}], max_tokens=60, extra_body=T0,
                            tools=[{"name": "get_weather", "input_schema": fn["parameters"]}], tool_choice={"type": "any"})
    use = next(b for b in tu.content if b.type == "tool_use")
    back = an.messages.create(model="smol", max_tokens=24, extra_body=T0, tools=[{"name": "get_weather", "input_schema": fn["parameters"]}],
                              messages=[{"role": "user", "content": "What is the weather in Paris?"}, {"role": "assistant", "content": [use.model_dump()]},
                                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 21 C"}]}])
    assert tu.stop_reason == "tool_use" and back.content and back.content[0].type == "text"
