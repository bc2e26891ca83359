"""Hostile sampling settings and logits. Every field of `SamplingParams` gets extreme values (tiny, huge, subnormal, -0.0, inf,
NaN, integers too large for a float, bools and numpy scalars where numbers are expected, strings, None): the object either refuses
them with a `ValueError` naming the field (and it refuses exactly what the documented ranges leave out, judged here by an
independent oracle), or the sampler, alone and in a batch, gives a token id inside the vocabulary, never a masked one, with finite
log-probabilities, on logits from 1e-3 to 1e37 in size. Logits that are NaN or +inf, or -inf everywhere (the model's or a logits
processor's), give a `NonFiniteLogitsError` (a ValueError) for that row or request alone, never an IndexError or RuntimeError.
(Checked to fail on the sampler before the float32 ranges: repetition_penalty=1e-300 raised 'RuntimeError: index ... is out of
bounds', temperature=1e39 drew from NaN, numpy seeds overflowed.)"""
import math, numbers

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st, HealthCheck

from xllm.sampling import SamplingParams, Sampler, NonFiniteLogitsError
from xllm.engine import Engine
from xllm.model import Llama
from _tiny import tiny_config, random_weights

sampler = Sampler()
F32_MAX = float(np.finfo(np.float32).max)
FIELDS = ["n", "max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty",
          "seed", "stop", "stop_token_ids", "ignore_eos", "logprobs"]

# ---------------------------------------------------------------- the accepted values, written from the documented ranges
FLOAT_RANGES = {"temperature": (0.0, F32_MAX, False), "top_p": (0.0, 1.0, True), "min_p": (0.0, 1.0, False),
                "repetition_penalty": (1e-6, 1e6, False), "presence_penalty": (-2.0, 2.0, False), "frequency_penalty": (-2.0, 2.0, False)}
INT_MIN = {"n": 1, "max_tokens": 1, "top_k": -1, "seed": -2**63, "logprobs": 0}
INT_MAX = {"seed": 2**64 - 1}                      # a seed is a signed or unsigned 64-bit integer
OPTIONAL = {"max_tokens", "seed", "logprobs"}


def _number(v) -> bool: return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def accepted(name, v) -> bool:
    "Whether the documented ranges accept `v` for field `name` (independent of SamplingParams.check)."
    if name in FLOAT_RANGES:
        if not _number(v): return False
        lo, hi, open_lo = FLOAT_RANGES[name]
        try: f = float(v)
        except OverflowError: return False
        if math.isnan(f): return False
        return (f > lo if open_lo else f >= lo) and f <= hi
    if name in INT_MIN:
        if v is None: return name in OPTIONAL
        if not isinstance(v, numbers.Integral) or isinstance(v, (bool, np.bool_)): return False
        return v >= INT_MIN[name] and v <= INT_MAX.get(name, v)
    if name == "stop":
        if v is None: return True
        if isinstance(v, str): return v != ""
        return isinstance(v, (list, tuple)) and all(isinstance(s, str) and s for s in v)
    if name == "stop_token_ids":
        if v is None: return True
        return isinstance(v, (list, tuple)) and all(isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_)) and t >= 0 for t in v)
    if name == "ignore_eos": return isinstance(v, bool)
    raise KeyError(name)


# ---------------------------------------------------------------- hostile values
inf, nan = math.inf, math.nan
SPECIAL_FLOATS = [0.0, -0.0, 5e-324, 2.2e-308, 1e-310, 1e-300, 1e-45, 1.4e-45, 1.17e-38, 1e-30, 1e-7, 9.9e-6, 1e-5, 1.0000001e-5, 0.5,
                  1 - 1e-12, 1.0, 1 + 1e-12, 2.0, 2.0000000001, 100.0, 1e6, 1.0000001e6, 1e30, 3.4e38, F32_MAX, 3.4028236e38, 1e39,
                  1e300, 1.7976931348623157e308, inf, nan]
SPECIAL = ([s * x for x in SPECIAL_FLOATS for s in (1, -1)] + [True, False, 0, 1, 2, -1, 3, 10**400, -10**400, 2**64, np.float32(1e-40),
           np.float32(0.7), np.float64(1e-300), np.float16(6e-8), np.int64(3), np.int8(-1), np.bool_(True), "1", None, [1], 1j])
def floats(lo, hi):
    "Anything, or a float inside the field's range, or one of its edges and the floats next to them."
    edges = [e for b in (lo, hi) for e in (b, math.nextafter(b, -inf), math.nextafter(b, inf), np.float32(b))]
    return st.one_of(st.sampled_from(SPECIAL), st.floats(), st.integers(-10**40, 10**40), st.floats(lo, hi), st.sampled_from(edges))
ints = st.one_of(st.sampled_from(SPECIAL), st.integers(-3, 40), st.integers(-2**70, 2**70))
texts = st.text(max_size=3)
VALUES = {**{k: floats(lo, hi) for k, (lo, hi, _) in FLOAT_RANGES.items()}, **{k: ints for k in INT_MIN},
          "stop": st.one_of(st.none(), texts, st.lists(texts, max_size=3), st.sampled_from([5, [None], ["a", 1], ("x",), True])),
          "stop_token_ids": st.one_of(st.none(), st.lists(st.one_of(st.integers(-3, 2**70), st.sampled_from([True, 1.0, np.int64(4)])), max_size=3),
                                      st.sampled_from([7, "1", (1, 2)])),
          "ignore_eos": st.sampled_from([True, False, 0, 1, None, np.bool_(True), "yes"])}
def _valid(name, strategy):
    "The values of `strategy` and of the hostile specials that the documented ranges accept for `name`."
    ok = [v for v in SPECIAL + [math.nextafter(b, d) for b in (0.0, 1.0, 2.0, -2.0, 1e-6, 1e6, F32_MAX) for d in (-inf, inf)] if accepted(name, v)]
    return st.one_of(strategy.filter(lambda v: accepted(name, v)), st.sampled_from(ok))
VALID = {**{k: _valid(k, st.floats(lo, hi)) for k, (lo, hi, _) in FLOAT_RANGES.items()},
         **{k: _valid(k, st.one_of(st.integers(-1, 60), st.integers(-2**70, 2**70))) for k in INT_MIN},
         **{k: VALUES[k].filter(lambda v, k=k: accepted(k, v)) for k in ("stop", "stop_token_ids", "ignore_eos")}}
valid_kwargs = st.lists(st.sampled_from(FIELDS), min_size=1, max_size=8, unique=True).flatmap(
    lambda names: st.fixed_dictionaries({k: VALID[k] for k in names}))
# most draws change one to three fields from their defaults, so that accepted combinations are common enough to be sampled
kwargs = st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4, unique=True).flatmap(
    lambda names: st.fixed_dictionaries({k: VALUES[k] for k in names}))


def make(kw):
    "SamplingParams(**kw) or None, checking that exactly the values outside the documented ranges are refused, naming the first."
    bad = [k for k in FIELDS if k in kw and not accepted(k, kw[k])]
    try: p = SamplingParams(**kw)
    except ValueError as e:
        assert bad, f"{kw} was refused: {e}"
        assert str(e).startswith(f"SamplingParams.{bad[0]} must be "), (kw, str(e))
        return None
    assert not bad, f"{kw}: {bad} accepted"
    for k in FLOAT_RANGES:                          # normalized: Python floats, finite, no -0.0
        v = getattr(p, k); assert type(v) is float and math.isfinite(v) and not (v == 0 and math.copysign(1, v) < 0), (k, v)
    for k in INT_MIN: assert getattr(p, k) is None or type(getattr(p, k)) is int
    return p


def random_logits(g, V, scale, masked):
    x = torch.randn(V, generator=g, dtype=torch.float64) * scale
    x = x.clamp(-F32_MAX, F32_MAX).float()
    if masked and V > 1: x[torch.randperm(V, generator=g)[: V // 2]] = -inf      # some tokens impossible, never all
    return x


def check_result(r, x, p, V):
    assert 0 <= r.token_id < V and math.isfinite(float(x[r.token_id])), (r, p)       # never a masked token
    assert math.isfinite(r.logprob) and r.logprob <= 1e-6, (r, p)
    if p.logprobs:
        assert r.top_logprobs is not None and len(r.top_logprobs) == min(p.logprobs, V)
        assert all(0 <= t < V and not math.isnan(v) and v <= 1e-6 for t, v in r.top_logprobs.items())
    if p.greedy and not p.has_penalties: assert r.token_id == int(x.argmax())


def generator(p, seed):
    return Sampler.make_generator(p, index=seed) if p.seed is not None else torch.Generator().manual_seed(seed)


def sample_everywhere(p, seed):
    "One row alone and in a batch with other settings, on logits of every size from 1e-3 to 1e37; the same result both ways."
    g = torch.Generator().manual_seed(seed)
    others = [SamplingParams(), SamplingParams(temperature=0), SamplingParams(temperature=0.7, top_p=0.9, repetition_penalty=1.2, logprobs=2)]
    for V, scale, masked in [(1, 1.0, False), (2, 1e-3, False), (7, 30.0, True), (300, 1.0, True), (300, 1e4, False), (50, 1e30, True), (50, 1e37, False)]:
        X = torch.stack([random_logits(g, V, scale, masked) for _ in range(4)])
        outs = [torch.randint(0, V, (int(torch.randint(0, 30, (1,), generator=g)),), generator=g).tolist() for _ in range(4)]
        prompts = [torch.randint(0, V, (3,), generator=g).tolist() for _ in range(4)]
        alone = sampler.sample(X[1], p, generator(p, seed), outs[1], prompts[1])
        check_result(alone, X[1], p, V)
        ps = [others[0], p, others[1], others[2]]
        together = sampler.sample_rows(X, ps, [generator(q, seed) for q in ps], outs, prompts)
        assert together[1] == alone, (p, V, scale, together[1], alone)
        for b in range(4): check_result(together[b], X[b], ps[b], V)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(kwargs, st.integers(0, 2**32))
def test_hostile_params_refused_or_sampled(kw, seed):
    p = make(kw)
    if p is not None:
        p.check()                                   # idempotent: a checked object passes again, unchanged
        sample_everywhere(p, seed)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(valid_kwargs, st.integers(0, 2**32))
def test_accepted_extremes_sample_cleanly(kw, seed):
    "Only values inside the ranges, many fields at once and often at their edges: every one is accepted and samples cleanly."
    p = make(kw)
    assert p is not None
    sample_everywhere(p, seed)


@pytest.mark.parametrize("name", [k for k in FIELDS if k not in ("stop", "stop_token_ids", "ignore_eos")])
def test_every_extreme_value_of_every_field(name):
    "The dense grid: each special value alone in each numeric field, and with the most extreme accepted values of the others."
    n_ok = 0
    for v in SPECIAL:
        for base in ({}, dict(temperature=1e-5, repetition_penalty=1e-6, presence_penalty=-2.0, frequency_penalty=-2.0, logprobs=40, seed=-2**63),
                     dict(temperature=F32_MAX, repetition_penalty=1e6, top_p=5e-324, min_p=1.0, top_k=1)):
            p = make({**base, name: v})
            if p is not None: sample_everywhere(p, 0); n_ok += 1
    assert n_ok >= 3, name                           # some values of every field are accepted and sampled


def test_known_cases():
    "The reported ones, and the float32 limits of each range, by name."
    for kw, field in [(dict(repetition_penalty=1e-300), "repetition_penalty"), (dict(repetition_penalty=1e300), "repetition_penalty"),
                      (dict(temperature=1e39), "temperature"), (dict(temperature=True), "temperature"), (dict(top_p=True), "top_p"),
                      (dict(n=True), "n"), (dict(seed=1.0), "seed"), (dict(logprobs=False), "logprobs"), (dict(presence_penalty=10**400), "presence_penalty"),
                      (dict(min_p=np.bool_(True)), "min_p"), (dict(temperature=2**1100), "temperature")]:
        with pytest.raises(ValueError, match=rf"^SamplingParams\.{field} must be "): SamplingParams(**kw)
    with pytest.raises(ValueError, match=r"\(\d+ characters\)"): SamplingParams(temperature=10**400)     # a huge value is not echoed whole
    p = SamplingParams(temperature=-0.0, seed=np.int64(2**62), top_p=5e-324, repetition_penalty=np.float32(2e-6), logprobs=np.int8(3))
    assert (str(p.temperature), type(p.seed), type(p.logprobs)) == ("0.0", int, int) and p.greedy
    sample_everywhere(p, 1)
    assert SamplingParams(temperature=9.9e-6).greedy and not SamplingParams(temperature=1e-5).greedy   # below 1e-5: greedy (vLLM)
    # the overflow that a strong penalty or a small temperature meets on large logits is computed again in float64: the same token
    x = torch.tensor([3e37, -3e38, 2.9e37, 1.0])
    raw = torch.log_softmax(x.double(), 0)
    for p, want in [(SamplingParams(temperature=1e-5, seed=0), 0),                 # 3e37 / 1e-5 is +inf in float32
                    (SamplingParams(temperature=0, repetition_penalty=1e-6), 2),    # 2.9e37 / 1e-6 too: token 2, seen, is now the largest
                    (SamplingParams(temperature=1e-5, repetition_penalty=1e-6, presence_penalty=-2.0, seed=0, logprobs=4), 2)]:
        r = sampler.sample(x, p, Sampler.make_generator(p) if p.seed is not None else None, [1, 2], [3])
        assert r.token_id == want and math.isclose(r.logprob, float(raw[want]), rel_tol=1e-6), (p, r)   # -1e36 for token 2: finite
        if p.logprobs:
            assert list(r.top_logprobs) == [0, 2, 3, 1] and all(math.isclose(v, float(raw[t]), rel_tol=1e-6) for t, v in r.top_logprobs.items())


def test_logprobs_beyond_float32():
    "At the largest temperature a token 6e38 below the top is drawn about half the time: its log-prob, -6e38, is finite in float64."
    x, p = torch.tensor([3e38, -3e38]), SamplingParams(temperature=F32_MAX, logprobs=2, seed=0)
    g = Sampler.make_generator(p)
    rs = [sampler.sample(x, p, g) for _ in range(40)]
    assert {r.token_id for r in rs} == {0, 1}
    for r in rs:
        assert math.isclose(r.logprob, [0.0, -6e38][r.token_id], rel_tol=1e-6, abs_tol=1e-6), r
        assert list(r.top_logprobs) == [0, 1] and math.isclose(r.top_logprobs[1], -6e38, rel_tol=1e-6)


def test_bad_logits_fail_their_row_only():
    X = torch.randn(4, 30)
    X[1, 5] = nan; X[2] = -inf; X[3, 0] = inf
    res = sampler.sample_rows(X, [SamplingParams(seed=0, repetition_penalty=1e-6)] * 4, [torch.Generator().manual_seed(0) for _ in range(4)],
                              [[1, 2]] * 4, [[3]] * 4)
    assert isinstance(res[0].token_id, int)
    assert [type(r) for r in res[1:]] == [NonFiniteLogitsError] * 3 and all(isinstance(r, ValueError) for r in res[1:])
    assert "1 NaN and 0 +inf values (first at token id 5)" in str(res[1]) and "every logit is -inf" in str(res[2]) and "0 NaN and 1 +inf" in str(res[3])
    with pytest.raises(ValueError, match="no entries"): sampler.sample(torch.zeros(0), SamplingParams())
    # a field changed after the check (not re-checked by the sampler, which runs every step) still fails cleanly, by name
    p = SamplingParams(); p.repetition_penalty = 0.0
    X[0, 1:3] = X[0, 1:3].abs() + 0.1          # seen tokens with positive logits: dividing by the penalty 0 makes +inf (unseeded randn was negative 1 time in 4)
    with pytest.raises(NonFiniteLogitsError, match=r"repetition_penalty=0.0.*changed after SamplingParams.check"): sampler.sample(X[0], p, None, [1], [2])


# ---------------------------------------------------------------- through the engine: a clean per-request error
@pytest.fixture(scope="module")
def model():
    cfg = tiny_config()
    return Llama.from_weights(cfg, random_weights(cfg, seed=0)).eval()


def test_engine_hostile_settings_and_processors(model):
    V = model.config.vocab_size
    ok = [SamplingParams(temperature=1e-5, repetition_penalty=1e-6, presence_penalty=-2, max_tokens=6, ignore_eos=True, seed=-2**63, logprobs=40),
          SamplingParams(temperature=F32_MAX, top_p=5e-324, min_p=1.0, top_k=10**30, repetition_penalty=1e6, frequency_penalty=2, max_tokens=6, ignore_eos=True),
          SamplingParams(temperature=0, repetition_penalty=1e-6, max_tokens=6, ignore_eos=True, logprobs=0),
          SamplingParams(temperature=0.5, max_tokens=6, ignore_eos=True, seed=np.int64(2**63 - 1))]
    all_masked = lambda out, row: torch.full_like(row, -inf)
    nan_after_2 = lambda out, row: row * nan if len(out) == 2 else row
    huge = lambda out, row: row * 1e37                          # finite, but overflows under the temperature: computed in float64
    eng = Engine(model, block_size=4, num_blocks=64, max_num_seqs=8, max_logprobs=40)     # logprobs=40: above vLLM's default limit of 20
    prompt = [1, 5, 9, 13]
    rids = [eng.add_request(prompt, p) for p in ok]
    rids += [eng.add_request(prompt, SamplingParams(max_tokens=6, ignore_eos=True), logits_processors=[f]) for f in (all_masked, nan_after_2)]
    rids.append(eng.add_request(prompt, SamplingParams(temperature=1e-5, seed=3, max_tokens=6, ignore_eos=True), logits_processors=[huge]))
    toks, fin = {r: [] for r in rids}, {}
    while eng.has_unfinished():
        for o in eng.step():
            toks[o.request_id] += o.new_token_ids
            if o.finished: fin[o.request_id] = o
    for r in rids[:4] + rids[6:]:
        assert fin[r].finish_reason == "length" and len(toks[r]) == 6 and all(0 <= t < V for t in toks[r]), (r, fin[r])
    assert fin[rids[4]].finish_reason == "error" and fin[rids[4]].error == \
        "NonFiniteLogitsError: every logit is -inf after the logits processors '<lambda>': no token can be sampled"
    assert fin[rids[5]].finish_reason == "error" and len(toks[rids[5]]) == 2
    assert fin[rids[5]].error.startswith("NonFiniteLogitsError: logits contain ") and "the logits processors '<lambda>' produced non-finite numbers" in fin[rids[5]].error
    # a field made invalid after construction is refused when the request is added, by name
    p = SamplingParams(); p.temperature = 1e-300 * -1
    with pytest.raises(ValueError, match=r"^SamplingParams\.temperature must be"): eng.add_request(prompt, p)
    p = SamplingParams(); p.top_k = True
    with pytest.raises(ValueError, match=r"^SamplingParams\.top_k must be"): eng.add_request(prompt, p)
    assert not eng.has_unfinished()
