"""The INT8 KV cache of xllm.engine on every available device (CPU always, CUDA when present): the quantize/dequantize round trip
is within half a step per element, the pool's write/gather path equals it, and paged logits with int8 K/V stay within 5e-2 of the
float-K/V logits (relative to max|logit|), as 14_engine.ipynb measures on CPU."""
import pytest, torch
from xllm.model import Llama
from xllm.engine import Engine
from xllm.kv_cache import kv_cache_bytes_per_token
from xllm.kv_pool import PagedKVPool, quantize_kv, dequantize_kv
from xllm.model import PagedBatch
from _tiny import tiny_config, random_weights

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def random_model(device, seed=0):
    cfg = tiny_config()
    w = random_weights(cfg, seed, scale=1.0)
    return Llama.from_weights(cfg, {k: v.to(device) for k, v in w.items()}, dtype=torch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_round_trip_half_step(device):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(300, 2, 24, generator=g) * torch.logspace(-3, 2, 300)[:, None, None]).to(device)
    x[5] = 0
    q, s = quantize_kv(x)
    assert q.dtype == torch.int8 and s.dtype == torch.float32
    assert ((dequantize_kv(q, s) - x).abs() <= s[..., None] / 2 * (1 + 1e-6)).all()
    assert (q.abs().amax(-1) == torch.where(s > 0, 127, 0)).all()


@pytest.mark.parametrize("device", DEVICES)
def test_int8_logits_close_to_float(device):
    m = random_model(device)
    ids = torch.randint(3, 384, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    out = {}
    for kv in (None, "int8"):
        pool = PagedKVPool(m.config, 4, 16, m.dtype, m.device, kv)
        table = [2, 0, 3]
        rows = [m(PagedBatch.build([(ids[:30], 0, table)], 16, pool.null_slot, "all", m.device), pool)]
        for p in range(30, 40):
            rows.append(m(PagedBatch.build([(ids[p:p + 1], p, table)], 16, pool.null_slot, "last", m.device), pool))
        out[kv] = torch.cat(rows).cpu()
        assert pool.nbytes == pool.num_tokens * kv_cache_bytes_per_token(m.config, m.dtype, kv)
    rel = ((out["int8"] - out[None]).abs().max() / out[None].abs().max()).item()
    assert 0 < rel < 5e-2, rel
    eng = Engine(m, num_blocks=16, block_size=16, kv_cache_dtype="int8")
    assert "int8" in eng.kv_cache_report
    r = eng.generate([(ids[:10], None)])[0]
    assert r.finish_reason in ("stop", "length") and eng.block_manager.num_used_blocks == 0
