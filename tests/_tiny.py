"""Shared by the device tests: a tiny random Llama (GQA, head_dim 24), a relative-error measure and greedy decoding."""
import torch
from xllm.core import LlamaConfig
from xllm.model import Llama, random_llama


def tiny_config(**kw) -> LlamaConfig:
    "3 layers, hidden 96, 6 heads over 2 KV heads of 24, vocab 384; keyword arguments override."
    d = dict(vocab_size=384, hidden_size=96, intermediate_size=160, num_hidden_layers=3, num_attention_heads=6,
             num_key_value_heads=2, head_dim=24, max_position_embeddings=512, eos_token_id=[2])
    d.update(kw)
    return LlamaConfig(**d)


def random_weights(cfg: LlamaConfig, seed: int = 0, scale: float = 1.5) -> dict:
    "HF-named random weights for `cfg` (`xllm.model.random_llama`'s): norms in [0.7, 1.3), embeddings N(0, 0.3), matrices N(0, scale/sqrt(fan_in))."
    return dict(random_llama(cfg, seed, scale).state_dict())


def rel(a, b) -> float:
    "max|a - b| / max|b|, in float64 on the CPU."
    return ((a.double().cpu() - b.double().cpu()).abs().max() / b.double().abs().max()).item()


def greedy(m: Llama, ids, n: int, eos: int | None = None) -> list[int]:
    "`n` greedy tokens after `ids` through the contiguous KV cache (stopping after `eos` when given)."
    cache = m.new_cache(len(ids) + n)
    logits, out = m(torch.as_tensor(ids, device=m.device), cache, last_only=True), []
    for _ in range(n):
        out.append(int(logits[-1].argmax()))
        if out[-1] == eos: break
        logits = m(torch.tensor([out[-1]], device=m.device), cache)
    return out
