"""Speculative decoding (prompt lookup) on the default model (SmolLM2-135M-Instruct, Q4_1 GGUF): greedy output, stop strings,
max_tokens and logprobs are those of decoding without it; a seeded sampled request is reproducible; proposals are accepted on an
input-grounded prompt. (The exactness of the sampled distribution is tested in nbs/13b_speculative.ipynb on tiny models.)"""
import pytest
import torch

from xllm.core import default_model_path
from xllm.sampling import SamplingParams


def _default_model():
    try: return default_model_path(download=False)
    except FileNotFoundError: pytest.skip("default model not in the cache")


@pytest.fixture(scope="module")
def llms():
    from xllm.llm import LLM
    n = torch.get_num_threads()
    torch.set_num_threads(1)           # as test_llm_e2e: one intra-op thread on the shared CI box
    path = _default_model()
    # adaptive=False: every proposal is verified, whatever the (noisy, shared) machine's step times say
    yield LLM(path, max_num_seqs=4), LLM(path, max_num_seqs=4, speculative={"method": "ngram", "num_tokens": 8, "prompt_lookup_min": 2, "adaptive": False})
    torch.set_num_threads(n)


GROUNDED = ("Rename the variable x to total in this JavaScript function and return the whole function: "
            "function sumPrices(items) { let x = 0; for (const item of items) { if (item.price > 0) { x += item.price * item.quantity; } } return x; }")
OPEN = "Write a short poem about the sea."


def _chat(llm, text): return [{"role": "user", "content": text}]


def test_greedy_identical_and_accepted(llms):
    off, on = llms
    for text in (GROUNDED, OPEN):
        p = SamplingParams(temperature=0, max_tokens=96, logprobs=1)
        a, b = off.chat(_chat(off, text), p, use_tqdm=False)[0].outputs[0], on.chat(_chat(on, text), p, use_tqdm=False)[0].outputs[0]
        assert b.token_ids == a.token_ids and b.text == a.text and b.finish_reason == a.finish_reason
        assert len(b.logprobs) == len(a.logprobs)
        for x, y in zip(a.logprobs, b.logprobs):     # the verifying forward sums in another order: float32 rounding only
            assert list(x) == list(y) and max(abs(x[t] - y[t]) for t in x) < 1e-3
    s = on.get_engine().spec_stats
    assert s.num_accepted > 20 and s.mean_accepted_length > 1.5, s


def test_stops_inside_accepted_runs(llms):
    "max_tokens, a stop string and a stop token that fall inside a run of accepted proposals end the output where plain decoding does."
    off, on = llms
    ref = off.chat(_chat(off, GROUNDED), SamplingParams(temperature=0, max_tokens=96), use_tqdm=False)[0].outputs[0]
    words = ref.text.split()
    cases = [SamplingParams(temperature=0, max_tokens=n) for n in (1, 2, 7, 33)]
    cases += [SamplingParams(temperature=0, max_tokens=96, stop=[words[len(words) // 2]]),
              SamplingParams(temperature=0, max_tokens=96, stop_token_ids=[ref.token_ids[len(ref.token_ids) // 2]])]
    for p in cases:
        a, b = (m.chat(_chat(m, GROUNDED), p, use_tqdm=False)[0].outputs[0] for m in (off, on))
        assert (b.token_ids, b.text, b.finish_reason, b.stop_reason) == (a.token_ids, a.text, a.finish_reason, a.stop_reason), p
    assert on.get_engine().block_manager.num_used_blocks == 0


def test_seeded_sampling_reproducible(llms):
    _, on = llms
    p = SamplingParams(temperature=0.8, top_p=0.95, seed=7, max_tokens=48, repetition_penalty=1.1)
    a, b = (on.chat(_chat(on, GROUNDED), p, use_tqdm=False)[0].outputs[0] for _ in range(2))
    assert a.token_ids == b.token_ids and len(a.token_ids) > 0


@pytest.fixture(scope="module")
def drafted(llms):
    "The default model with a draft model: itself, loaded again from its path (a draft that agrees except at float32 near-ties)."
    from xllm.llm import LLM
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    path = _default_model()
    yield LLM(path, max_num_seqs=4, speculative={"method": "draft", "model": str(path), "num_tokens": 4, "adaptive": False})
    torch.set_num_threads(n)


def test_draft_model_greedy_identical(llms, drafted):
    off, on = llms[0], drafted
    eng = on.get_engine()
    assert eng.proposer is not None and "draft model 30 layers" in repr(eng)
    for text in (GROUNDED, OPEN):
        p = SamplingParams(temperature=0, max_tokens=64, logprobs=1)
        a, b = off.chat(_chat(off, text), p, use_tqdm=False)[0].outputs[0], on.chat(_chat(on, text), p, use_tqdm=False)[0].outputs[0]
        assert (b.token_ids, b.text, b.finish_reason) == (a.token_ids, a.text, a.finish_reason)
        for x, y in zip(a.logprobs, b.logprobs): assert list(x) == list(y) and max(abs(x[t] - y[t]) for t in x) < 1e-3
    s = eng.spec_stats
    assert s.acceptance_rate > 0.8 and s.mean_accepted_length > 3, s
    assert eng.block_manager.num_used_blocks == 0


def test_draft_model_sampled_seeded_and_batched(llms, drafted):
    "Seeded sampled requests through a draft are reproducible, and a batch of them (each drafting and verifying) all complete."
    p = SamplingParams(temperature=0.8, top_p=0.95, seed=11, max_tokens=40, repetition_penalty=1.1)
    a, b = (drafted.chat(_chat(drafted, OPEN), p, use_tqdm=False)[0].outputs[0] for _ in range(2))
    assert a.token_ids == b.token_ids and len(a.token_ids) > 0
    outs = drafted.generate(["Count from one to ten.", "Name three colours.", "Say hello.", "Write a haiku."],
                            SamplingParams(temperature=0.7, max_tokens=24, seed=3), use_tqdm=False)
    assert all(o.outputs[0].finish_reason in ("stop", "length") and o.outputs[0].token_ids for o in outs)


def test_structured_outputs_speculate(llms, drafted):
    "A JSON-schema request speculates (prompt lookup and a draft) and gives the tokens it gives without speculation."
    import json
    from xllm.sampling import StructuredOutputsParams
    off, on = llms
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "total": {"type": "integer"}}, "required": ["name", "total"]}
    text = GROUNDED + " Then answer as JSON with the function's name and the number of loops."
    p = SamplingParams(temperature=0, max_tokens=64, structured_outputs=StructuredOutputsParams(json=schema))
    ref = off.chat(_chat(off, text), p, use_tqdm=False)[0].outputs[0]
    json.loads(ref.text)
    for llm in (on, drafted):
        s0 = llm.get_engine().spec_stats.num_verifications
        got = llm.chat(_chat(llm, text), p, use_tqdm=False)[0].outputs[0]
        assert (got.token_ids, got.text, got.finish_reason) == (ref.token_ids, ref.text, ref.finish_reason)
        assert llm.get_engine().spec_stats.num_verifications > s0           # it did speculate


def test_draft_model_fails_when_the_llm_is_built(tmp_path):
    "A draft path that is not a model fails in LLM(...), with the loader's message, not at the first request."
    from xllm.core import ModelFormatError
    from xllm.llm import LLM
    junk = tmp_path / "junk.gguf"; junk.write_bytes(b"GGUF but nothing else")
    with pytest.raises(ModelFormatError, match="junk.gguf"):
        LLM(_default_model(), speculative={"method": "draft", "model": str(junk)})
    with pytest.raises(ValueError, match="speculative model: not found"):
        LLM(_default_model(), speculative={"method": "draft", "model": str(tmp_path / "missing.gguf")})
