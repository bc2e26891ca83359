"""Batch invariance on the default model: a request's greedy tokens are the same whether it runs alone or in a step with 7
others, with int8 activations: the compiled runner's row path (decode of one request) and its int8 GEMM (a step of several)
compute the same bits by construction (nbs/15). (Float activations are not asserted: there the two paths sum in different
orders, and a near-tie may break differently on another CPU.)"""
import pytest
import torch

from xllm.core import default_model_path
from xllm.sampling import SamplingParams

PROMPTS = ["Name three fruits.", "What is the capital of France?", "Write a haiku about the sea.", "Explain what a CPU cache is.",
           "Count from one to ten.", "Translate 'good morning' into Spanish.", "Give me a tip for learning to code.", "What is 12 times 7?"]


def test_alone_equals_together_int8(monkeypatch):
    activations = "int8"
    from xllm import cpu_kernels
    try: path = default_model_path(download=False)
    except FileNotFoundError: pytest.skip("default model not in the cache")
    if not cpu_kernels.available() or cpu_kernels.isa().startswith("none"): pytest.skip("no int8 dot products in the CPU kernels here")
    from xllm.llm import LLM
    monkeypatch.setenv("XLLM_CPU_ACTIVATIONS", activations)
    n = torch.get_num_threads(); torch.set_num_threads(1)
    try:
        llm = LLM(path, max_num_seqs=8)
        assert activations in llm.get_engine().runner.description
        p = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
        msgs = [[{"role": "user", "content": q}] for q in PROMPTS]
        together = [o.outputs[0].token_ids for o in llm.chat(msgs, p, use_tqdm=False)]
        alone = [llm.chat([m], p, use_tqdm=False)[0].outputs[0].token_ids for m in msgs]
        assert together == alone
    finally: torch.set_num_threads(n)
