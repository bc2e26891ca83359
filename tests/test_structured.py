"""Structured outputs end to end on the default model (SmolLM2-135M-Instruct): the official `openai` client's
`chat.completions.parse(response_format=PydanticModel)` against `xllm serve`, sampled, for a dozen schemas."""
import json
from enum import Enum
from typing import Literal, Optional

import pytest

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")
pytest.importorskip("llguidance")
from pydantic import BaseModel, Field

from xllm.llm import LLM
from xllm.sampling import SamplingParams, StructuredOutputsParams
from xllm.server import start_server

KEY = "k"


class Color(str, Enum):
    red = "red"; green = "green"; blue = "blue"

class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int = Field(ge=0, le=120)

class Address(BaseModel):
    street: str = Field(max_length=30)
    city: str = Field(max_length=20)
    zip_code: str = Field(pattern=r"^[0-9]{5}$")

class Contact(BaseModel):
    person: Person
    address: Address

class Shopping(BaseModel):
    items: list[str] = Field(max_length=4)
    total: float = Field(ge=0, le=1000)

class Paint(BaseModel):
    color: Color
    coats: int = Field(ge=1, le=5)

class Review(BaseModel):
    title: str = Field(max_length=30)
    stars: int = Field(ge=1, le=5)
    comment: Optional[str] = Field(default=None, max_length=40)

class Flag(BaseModel):
    enabled: bool
    level: Literal["low", "medium", "high"]

class Point(BaseModel):
    x: float = Field(ge=-100, le=100)
    y: float = Field(ge=-100, le=100)

class Polygon(BaseModel):
    name: str = Field(max_length=16)
    points: list[Point] = Field(min_length=3, max_length=4)

class Team(BaseModel):
    team: str = Field(max_length=20)
    members: list[Person] = Field(min_length=1, max_length=3)
    lead: Optional[Person] = None

class Weather(BaseModel):
    city: str = Field(max_length=20)
    temperature_c: float = Field(ge=-50, le=60)
    conditions: list[Literal["sunny", "cloudy", "rain", "snow", "wind"]] = Field(max_length=3)

class Book(BaseModel):
    title: str = Field(max_length=30)
    year: int = Field(ge=1450, le=2030)
    isbn: Optional[str] = Field(default=None, pattern=r"^[0-9]{10}$")
    genres: list[Color] = Field(max_length=2)

SCHEMAS = [(Person, "Invent a person."), (Contact, "Give the contact details of a shop owner."), (Shopping, "Write a shopping list."),
           (Paint, "How should I paint my door?"), (Review, "Review a film you like."), (Flag, "Describe the alert level."),
           (Point, "Give a point on a plane."), (Polygon, "Describe a triangle."), (Team, "Describe a small team."),
           (Weather, "What is the weather in Paris?"), (Book, "Recommend a book.")]


@pytest.fixture(scope="module")
def llm():
    return LLM()          # the default model (downloaded once into ~/.cache/xllm)


@pytest.fixture(scope="module")
def client(llm):
    srv = start_server(llm, api_key=KEY, model_name="m")
    yield openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0, timeout=300)
    srv.stop()


@pytest.mark.parametrize("model,question", SCHEMAS, ids=[m.__name__ for m, _ in SCHEMAS])
def test_parse_sampled(client, model, question):
    "Sampled (temperature 0.8, three seeds) and greedy: every answer parses and validates against its pydantic model."
    for seed in (0, 1, 2, None):
        kw = dict(temperature=0.0) if seed is None else dict(temperature=0.8, seed=seed)
        r = client.chat.completions.parse(model="m", messages=[{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": question}],
                                          response_format=model, max_tokens=400, **kw)
        ch = r.choices[0]
        assert ch.finish_reason == "stop", (seed, ch)
        assert isinstance(ch.message.parsed, model), (seed, ch.message.content)
        model.model_validate_json(ch.message.content)          # the text itself, validated again


def test_stream_and_fields(client, llm):
    "Streaming with a schema gives the same text as not streaming (greedy); json_object, guided_choice, guided_regex and a bad schema."
    msgs = [{"role": "user", "content": "Invent a person."}]
    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": {**Person.model_json_schema(), "additionalProperties": False}, "strict": True}}
    full = client.chat.completions.create(model="m", messages=msgs, response_format=rf, temperature=0, max_tokens=200).choices[0].message.content
    parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(model="m", messages=msgs, response_format=rf, temperature=0,
                                                                                        max_tokens=200, stream=True) if c.choices]
    assert "".join(parts) == full
    Person.model_validate_json(full)
    # any JSON object: nothing bounds its strings, so a sampled one may run to max_tokens; it is then a prefix of an object
    for seed in (None, 3):
        kw = dict(temperature=0) if seed is None else dict(temperature=0.8, seed=seed)
        obj = client.chat.completions.create(model="m", messages=msgs, response_format={"type": "json_object"}, max_tokens=300, **kw).choices[0]
        assert obj.message.content.startswith("{"), obj
        if obj.finish_reason == "stop": assert isinstance(json.loads(obj.message.content), dict), obj
        else: assert obj.finish_reason == "length", obj
    c = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Is the sky blue?"}], extra_body={"guided_choice": ["yes", "no"]},
                                       temperature=1.0, seed=0, max_tokens=10)
    assert c.choices[0].message.content in ("yes", "no") and c.choices[0].finish_reason == "stop"
    c = client.completions.create(model="m", prompt="The year was", extra_body={"structured_outputs": {"regex": " [12][0-9]{3}"}}, temperature=1.0, seed=0, max_tokens=10)
    assert len(c.choices[0].text) == 5 and c.choices[0].text[1:].isdigit(), c.choices[0].text
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=msgs, extra_body={"guided_regex": "[0-9"}, max_tokens=5)
    assert e.value.body["param"] == "guided_regex"
    # the Python API: the same constraint through SamplingParams
    out = llm.generate(["Name a colour:"], SamplingParams(temperature=0.9, seed=1, max_tokens=10,
                                                           structured_outputs=StructuredOutputsParams(choice=["red", "green", "blue"])), use_tqdm=False)
    assert out[0].outputs[0].text in ("red", "green", "blue")


class Population(BaseModel):
    population_millions: float


QUESTIONS = ["Population of the Earth in millions, as JSON.", "How many people live on Earth, in millions?"]

def test_number_literal_ends(client):
    """Issue 40: a float field at temperature 0 wrote digits until max_tokens (LengthFinishReasonError); bounded, it ends, and parses.
    Which question runs away is a near-tie of the default model (with float32 K/V the first did; with the float16 K/V default the
    second does, the first writes a short number under both grammars), so at least one must run away unbounded -- the case the
    bound is for -- and every one ends and parses bounded."""
    import xllm.grammar as G
    ask = lambda q: client.chat.completions.parse(model="m", messages=[{"role": "user", "content": q}], response_format=Population,
                                                  temperature=0, max_tokens=64).choices[0]
    saved, G.grammar_cache = G.grammar_cache, G.GrammarCache(number_bounds=False)   # the schema compiled as it is: the old behaviour
    ran_away = []
    try:
        for q in QUESTIONS:
            try: ask(q)
            except openai.LengthFinishReasonError: ran_away.append(q)
    finally: G.grammar_cache = saved
    assert ran_away, "no question ran away unbounded: the test no longer exercises the bound"
    for q in QUESTIONS:
        ch = ask(q)
        assert ch.finish_reason == "stop", (q, ch)
        assert abs(ch.message.parsed.population_millions) < 10 ** G.JSON_INT_DIGITS, ch.message.content
        assert len(ch.message.content) < 60, ch.message.content


def test_number_literals_bounded():
    """The grammar of a schema's numbers, byte by byte (a byte tokenizer): random numbers within JSON_INT_DIGITS integer digits and
    JSON_FRACTION_DIGITS decimals pass wherever a number may stand (a typed field, an integer, an untyped value, json_object's values
    at any depth, an allOf); one digit more, one decimal more or an exponent is refused; the schema's own bounds are kept."""
    import random
    from xllm.grammar import JSON_FRACTION_DIGITS as F, JSON_INT_DIGITS as N, GrammarCache
    from xllm.stand_ins import byte_tokenizer
    bt, cache, plain = byte_tokenizer(), GrammarCache(), GrammarCache(number_bounds=False)
    def takes(schema, text, c=cache):
        g = c.get(bt, StructuredOutputsParams(json=schema) if schema != "object" else StructuredOutputsParams(json_object=True))
        for b in text.encode():
            if g.done or g.m.is_error() or not g.m.consume_token(b): return False
        return g.accepting
    rnd = random.Random(0)
    def number(int_digits, frac_digits=0, sign=True):
        i = "0" if int_digits == 0 else str(rnd.randint(1, 9)) + "".join(rnd.choices("0123456789", k=int_digits - 1))
        text = i + ("." + "".join(rnd.choices("0123456789", k=frac_digits)) if frac_digits else "")
        return ("-" if sign and rnd.random() < 0.5 and float(text) != 0 else "") + text   # (-0 is written 0: llguidance's ranges)
    places = {"number": ({"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}, '{"x":%s}'),
              "untyped": ({"type": "object", "properties": {"x": {}}, "required": ["x"]}, '{"x":%s}'),
              "json_object": ("object", '{"a":[1,{"b":[%s]}]}'),
              "extra property": ({"type": "object", "properties": {"a": {"type": "string"}}}, '{"a":"s","x":%s}'),
              "allOf": ({"allOf": [{"type": "object", "properties": {"x": {"type": "number"}}}, {"required": ["x"]}]}, '{"x":%s}')}
    for name, (schema, doc) in places.items():
        for _ in range(60):
            good = number(rnd.randint(0, N), rnd.choice([0, rnd.randint(1, F)]))
            assert takes(schema, doc % good), (name, good)
            for bad in (number(rnd.randint(N + 1, N + 4), rnd.randint(0, F)), number(rnd.randint(0, N), rnd.randint(F + 1, F + 4)),
                        number(rnd.randint(1, 3), rnd.randint(0, 3)) + rnd.choice(["e5", "E-3", "e+12"])):
                assert not takes(schema, doc % bad), (name, bad)
                assert takes(schema, doc % bad, plain), (name, bad)            # what the schema alone allows
    integer = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert takes(integer, '{"n":-%s}' % ("9" * N)) and not takes(integer, '{"n":1%s}' % ("0" * N)) and not takes(integer, '{"n":1.5}')
    own = {"type": "object", "properties": {"big": {"type": "integer", "minimum": 0, "maximum": 10 ** 18},
                                            "cents": {"type": "number", "multipleOf": 0.01, "minimum": -1e17, "maximum": 1e17}}}
    assert takes(own, '{"big":%s,"cents":-%s.25}' % (10 ** 18, "9" * 17)) and not takes(own, '{"big":1,"cents":0.125}')
    lits = {"type": "object", "properties": {"k": {"enum": [10 ** 18, 0.123456789012345]}}, "required": ["k"]}
    assert takes(lits, '{"k":%d}' % 10 ** 18) and takes(lits, '{"k":0.123456789012345}')
