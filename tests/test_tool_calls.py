"""Tool calls end to end on the default model (SmolLM2-135M-Instruct, whose template shows no tools: the generic format) with the
official `openai` client: a call, the tool's result sent back, a final answer; streaming and not; `tool_choice` 'required' and a
named function always give arguments that parse and validate under the tool's schema."""
import json

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("llguidance")

from xllm.llm import LLM
from xllm.server import start_server

KEY = "k"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The current weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                          "required": ["city", "unit"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {"name": "add", "description": "Add two integers",
       "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": -1000, "maximum": 1000},
                                                       "b": {"type": "integer", "minimum": -1000, "maximum": 1000}},
                      "required": ["a", "b"], "additionalProperties": False}}}
TOOLS = [WEATHER, ADD]


def _valid(name, args: str):
    "The arguments parse as JSON and fit the tool's schema (checked by hand: required keys, types, enums)."
    a = json.loads(args)
    if name == "get_weather":
        assert set(a) == {"city", "unit"} and isinstance(a["city"], str) and len(a["city"]) <= 30 and a["unit"] in ("celsius", "fahrenheit"), a
    else:
        assert set(a) == {"a", "b"} and all(type(a[k]) is int and -1000 <= a[k] <= 1000 for k in "ab"), a
    return a


@pytest.fixture(scope="module")
def client():
    srv = start_server(LLM(), api_key=KEY, model_name="m")
    yield openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0, timeout=300)
    srv.stop()


def _stream(client, **kw):
    "A streamed chat answer accumulated as the client's users do: content, tool calls by index, finish reason."
    content, calls, fin = "", {}, None
    for ch in client.chat.completions.create(stream=True, **kw):
        if not ch.choices: continue
        c = ch.choices[0]
        content += c.delta.content or ""
        for tc in c.delta.tool_calls or []:
            d = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            d["id"] = tc.id or d["id"]
            if tc.function and tc.function.name: d["name"] += tc.function.name
            if tc.function and tc.function.arguments: d["arguments"] += tc.function.arguments
        fin = c.finish_reason or fin
    return content, [calls[k] for k in sorted(calls)], fin


@pytest.mark.parametrize("stream", [False, True])
def test_round_trip(client, stream):
    "A required call, its result sent back as a tool message, then a final answer in words (tool_choice none), streamed or not."
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    kw = dict(model="m", tools=TOOLS, tool_choice="required", temperature=0.7, seed=1, max_tokens=120)
    if stream:
        content, calls, fin = _stream(client, messages=msgs, **kw)
        assert fin == "tool_calls" and len(calls) == 1 and calls[0]["id"].startswith("call_"), (content, calls, fin)
        call = {"id": calls[0]["id"], "type": "function", "function": {"name": calls[0]["name"], "arguments": calls[0]["arguments"]}}
    else:
        r = client.chat.completions.create(messages=msgs, **kw).choices[0]
        assert r.finish_reason == "tool_calls" and len(r.message.tool_calls) == 1, r
        tc = r.message.tool_calls[0]
        call = {"id": tc.id, "type": "function", "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
    _valid(call["function"]["name"], call["function"]["arguments"])
    msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
             {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"temperature": 21, "sky": "clear"})}]
    kw2 = dict(model="m", messages=msgs, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=40)
    if stream: content, calls, fin = _stream(client, **kw2)
    else:
        r = client.chat.completions.create(**kw2).choices[0]
        content, calls, fin = r.message.content, r.message.tool_calls or [], r.finish_reason
    assert content and not calls and fin in ("stop", "length"), (content, calls, fin)


@pytest.mark.parametrize("choice", ["required", "get_weather", "add"])
def test_enforced_arguments_always_valid(client, choice):
    "tool_choice 'required' or named: every answer is one call to an allowed tool with valid arguments (sampled, several seeds)."
    tc = choice if choice == "required" else {"type": "function", "function": {"name": choice}}
    for seed, q in enumerate(["What is 17 plus 25?", "Is it raining in Tokyo?", "Tell me a joke."]):
        r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}], tools=TOOLS, tool_choice=tc,
                                           temperature=1.0, seed=seed, max_tokens=120).choices[0]
        assert r.finish_reason == "tool_calls" and len(r.message.tool_calls) == 1, r
        f = r.message.tool_calls[0].function
        assert choice == "required" or f.name == choice, f
        _valid(f.name, f.arguments)
    content, calls, fin = _stream(client, model="m", messages=[{"role": "user", "content": "Add 2 and 3."}], tools=TOOLS, tool_choice=tc,
                                  temperature=1.0, seed=9, max_tokens=120)
    assert fin == "tool_calls" and len(calls) == 1 and not content, (content, calls)
    _valid(calls[0]["name"], calls[0]["arguments"])


def test_auto_and_refusals(client):
    "auto: the answer is either text or well-formed calls; malformed tool requests are a 400 naming the field."
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi! How are you?"}], tools=TOOLS, temperature=0, max_tokens=60).choices[0]
    for tc in r.message.tool_calls or []: json.loads(tc.function.arguments)
    assert r.finish_reason in ("stop", "length", "tool_calls") and (r.message.content or r.message.tool_calls), r
    for kw, param in [(dict(tools=[{"type": "function", "function": {"name": "x y"}}]), "tools"),
                      (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
                      (dict(tools=TOOLS, tool_choice="required", response_format={"type": "json_object"}), "tool_choice")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5, **kw)
        assert e.value.body["param"] == param, e.value.body
