"""lm-eval (EleutherAI's harness) against `xllm serve`: its `local-completions` model runs a multiple-choice (loglikelihood) task
and a generate_until task end to end over HTTP, tokenizing through the server (`tokenizer_backend=remote`: /tokenizer_info,
/tokenize, /detokenize). Loglikelihoods come from `echo` + `logprobs` with `max_tokens: 1` (the prompt scored in the prefill);
they must equal the same sums computed directly from `LLM.logits`, and the task's accuracy the one those sums give."""
import json, math
import pytest
import torch

lm_eval = pytest.importorskip("lm_eval")
pytest.importorskip("fastapi"); pytest.importorskip("uvicorn")

from xllm.core import default_model_path
from xllm.llm import LLM
from xllm.sampling import SamplingParams
from xllm.server import start_server
from xllm.stand_ins import stand_in_model

MC = [("The capital of France is", ["Paris", "London", "Berlin"], 0),        # lm-eval puts a space between question and choice
      ("Water freezes at zero degrees", ["Celsius", "Fahrenheit", "Kelvin"], 0),
      ("The opposite of hot is", ["cold", "warm", "blue"], 0),
      ("A week has seven", ["days", "months", "apples"], 0),
      ("Two plus two equals", ["four", "five", "seven"], 0),
      ("The sun rises in the", ["east", "west", "north"], 0)]
GEN = ["The capital of France is", "Once upon a time,", "def add(a, b):"]
TOL = 2e-3   # a sum of float32 log-probabilities: the server's batched prefill against one prompt alone through LLM.logits


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    try: return LLM(default_model_path())
    except Exception: return LLM(stand_in_model(tmp_path_factory.mktemp("stand-in")))   # offline: the same assertions


def _tasks(tmp):
    (tmp / "mc.jsonl").write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n" for q, c, a in MC))
    (tmp / "gen.jsonl").write_text("".join(json.dumps({"question": q, "answer": ""}) + "\n" for q in GEN))
    common = "dataset_path: json\ntest_split: test\ndoc_to_text: \"{{question}}\"\ndoc_to_target: \"{{answer}}\"\n"
    (tmp / "xllm_mc.yaml").write_text(f"task: xllm_mc\n{common}dataset_kwargs:\n  data_files:\n    test: {tmp / 'mc.jsonl'}\n"
                                      "output_type: multiple_choice\ndoc_to_choice: \"{{choices}}\"\nmetric_list:\n  - metric: acc\n")
    (tmp / "xllm_gen.yaml").write_text(f"task: xllm_gen\n{common}dataset_kwargs:\n  data_files:\n    test: {tmp / 'gen.jsonl'}\n"
                                       "output_type: generate_until\ngeneration_kwargs:\n  until: [\"\\n\"]\n  max_gen_toks: 12\n"
                                       "  do_sample: false\n  temperature: 0\nmetric_list:\n  - metric: exact_match\n")


def _loglikelihood(llm, context, continuation):
    "lm-eval's pair encoding (trailing spaces of the context go to the continuation), scored from `LLM.logits`: (sum, is_greedy)."
    n = len(context) - len(context.rstrip())
    if n: context, continuation = context[:-n], context[-n:] + continuation
    enc = lambda s: llm.tokenizer.encode(s, allow_special=True)
    whole, ctx = enc(context + continuation), enc(context)
    cont = whole[len(ctx):]
    lp = torch.log_softmax(llm.logits(ctx + cont).double(), -1)
    rows = lp[len(ctx) - 1:len(ctx) + len(cont) - 1]
    return float(sum(rows[i, t] for i, t in enumerate(cont))), all(int(rows[i].argmax()) == t for i, t in enumerate(cont))


def test_lm_eval_local_completions(llm, tmp_path, monkeypatch):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1"); monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _tasks(tmp_path)
    srv = start_server(llm, model_name="xllm-test")
    try:
        res = simple_evaluate(model="local-completions", tasks=["xllm_mc", "xllm_gen"], task_manager=TaskManager(include_path=str(tmp_path)),
                              model_args={"base_url": srv.url + "/v1/completions", "model": "xllm-test", "tokenizer_backend": "remote",
                                          "tokenized_requests": True, "num_concurrent": 1, "max_retries": 1},
                              log_samples=True, bootstrap_iters=0)
    finally: srv.stop()
    mc = sorted(res["samples"]["xllm_mc"], key=lambda s: s["doc_id"])
    assert len(mc) == len(MC)
    right = 0
    for s, (q, choices, gold) in zip(mc, MC):
        got = [r[0] for r in s["resps"]]                      # one (loglikelihood, is_greedy) per choice
        want = [_loglikelihood(llm, *a) for a in s["arguments"]]
        assert [tuple(a) for a in s["arguments"]] == [(q, " " + c) for c in choices]
        for (g_ll, g_greedy), (w_ll, w_greedy) in zip(got, want):
            assert abs(g_ll - w_ll) < TOL and g_greedy == w_greedy, (q, g_ll, w_ll, g_greedy, w_greedy)
        right += max(range(len(want)), key=lambda k: want[k][0]) == gold
    assert math.isclose(res["results"]["xllm_mc"]["acc,none"], right / len(MC))
    print(f"lm-eval xllm_mc acc {right}/{len(MC)}")
    gen = sorted(res["samples"]["xllm_gen"], key=lambda s: s["doc_id"])
    for s, q in zip(gen, GEN):
        ids = llm.tokenizer.encode(q, allow_special=True)
        ref = llm.generate({"prompt_token_ids": ids}, SamplingParams(temperature=0, max_tokens=12, stop=["\n"]), use_tqdm=False)[0].outputs[0].text
        assert s["resps"][0][0] == ref, (q, s["resps"][0][0], ref)
